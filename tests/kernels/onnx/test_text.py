"""TfIdfVectorizer, StringNormalizer, StringConcat, StringSplit and RegexFullMatch against
onnxruntime under both drivers: seeded random token streams over pools of every gram length,
skips, modes and weights; strings with stopwords, cases, delimiters, broadcasting, empty
strings and empty tensors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.nodes import assert_native_matches, one_node

DRIVERS = ["cython", "python"]
RNG = np.random.default_rng(23)
WORDS = np.array(["a", "b", "c", "d", "é", "A", "", "bb"], object)


def _pool(rng, vocabulary, max_n):
    """A pool of distinct n-grams of each length 1..max_n over `vocabulary` (ints), with its
    ngram_counts and a permuted ngram_indexes."""
    pool, counts = [], []
    for n in range(1, max_n + 1):
        counts.append(len(pool))
        grams = {tuple(rng.choice(vocabulary, n)) for _ in range(int(rng.integers(1, 6)))}
        pool.extend(v for gram in sorted(grams) for v in gram)
    n_grams = sum(((counts[k + 1] if k + 1 < len(counts) else len(pool)) - counts[k]) // (k + 1)
                  for k in range(len(counts)))
    return pool, counts, rng.permutation(n_grams)


def _tfidf(seed, mode="TF", strings=False, dtype=np.int64, shape=(3, 9), weights=False,
           min_n=None, max_n=None, max_skip=None):
    rng = np.random.default_rng(seed)
    max_n = max_n or int(rng.integers(1, 4))
    min_n = min_n or int(rng.integers(1, max_n + 1))
    vocabulary = np.arange(5)
    pool, counts, indexes = _pool(rng, vocabulary, max_n)
    x = rng.integers(0, 6, shape)  # (5: a token in no n-gram)
    attrs = {"mode": mode, "min_gram_length": min_n, "max_gram_length": max_n,
             "max_skip_count": int(rng.integers(0, 4)) if max_skip is None else max_skip,
             "ngram_counts": counts, "ngram_indexes": [int(v) for v in indexes]}
    if strings:
        attrs["pool_strings"] = [str(WORDS[v]) for v in pool]
        x = WORDS[x]
    else:
        attrs["pool_int64s"] = pool
        x = x.astype(dtype)
    if weights:
        attrs["weights"] = [float(w) for w in rng.uniform(0.5, 2, len(indexes))]
    return attrs, x


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("seed", range(8))
def test_tfidf_vectorizer_matches_onnxruntime(seed, mode, driver):
    attrs, x = _tfidf(seed, mode, weights=seed % 2 == 1)
    model, feeds = one_node("TfIdfVectorizer", 9, attrs, [x])
    assert_native_matches(model, feeds, driver=driver)


@pytest.mark.parametrize("case", [
    {"dtype": np.int32}, {"strings": True}, {"strings": True, "mode": "TFIDF", "weights": True},
    {"shape": (11,)}, {"shape": (2, 1)}, {"shape": (4, 0)}, {"shape": (0, 5)}, {"shape": (0,)},
    {"min_n": 1, "max_n": 1, "max_skip": 3}, {"min_n": 2, "max_n": 3, "max_skip": 2},
    {"min_n": 3, "max_n": 3, "max_skip": 5, "shape": (2, 30)}], ids=str)
@pytest.mark.parametrize("seed", range(3))
def test_tfidf_vectorizer_cases_match_onnxruntime(seed, case):
    attrs, x = _tfidf(seed, **case)
    model, feeds = one_node("TfIdfVectorizer", 9, attrs, [x])
    assert_native_matches(model, feeds)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), rows=st.integers(1, 3), length=st.integers(0, 12),
       mode=st.sampled_from(["TF", "IDF", "TFIDF"]), weights=st.booleans())
def test_tfidf_vectorizer_on_random_streams_matches_onnxruntime(seed, rows, length, mode,
                                                                 weights):
    attrs, x = _tfidf(seed, mode, shape=(rows, length), weights=weights)
    model, feeds = one_node("TfIdfVectorizer", 9, attrs, [x])
    assert_native_matches(model, feeds)


def _words(shape, rng=RNG):
    return np.asarray(WORDS[rng.integers(0, len(WORDS), shape)], object)


UNICODE = np.array(["Abc", "straße", "ǆ", "İx", "ÉÉ", "éa", "ΣΑΣ", "ᾳ", "ﬀ", "Ǳ"], object)
NORMALIZER_CASES = [
    ({}, _words(7)),
    ({"case_change_action": "LOWER"}, _words((1, 6))),
    ({"case_change_action": "UPPER", "stopwords": ["a", "bb"]}, _words(9)),
    ({"stopwords": ["a", "B"], "is_case_sensitive": 0}, _words((1, 9))),
    ({"stopwords": ["a", "B"], "is_case_sensitive": 1, "case_change_action": "LOWER"},
     _words(9)),
    ({"stopwords": ["a"]}, np.array(["a", "A"], object)),  # (nothing left: one "")
    ({"stopwords": ["a"]}, np.array([["a"]], object)),
    ({"case_change_action": "UPPER"}, UNICODE),
    ({"case_change_action": "LOWER"}, UNICODE),
    ({"stopwords": ["ǆ", "ix", "σασ"]}, UNICODE),
    ({"case_change_action": "UPPER", "locale": "C"}, UNICODE),
    ({"case_change_action": "LOWER", "locale": "POSIX", "stopwords": ["abc", "éé"]}, UNICODE),
]


# (onnxruntime's default locale, en_US.UTF-8, is not installed everywhere: C.UTF-8 is glibc's)
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("attrs, x", NORMALIZER_CASES,
                         ids=[str(a) for a, _ in NORMALIZER_CASES])
def test_string_normalizer_matches_onnxruntime(attrs, x, driver):
    model, feeds = one_node("StringNormalizer", 10, {"locale": "C.UTF-8", **attrs}, [x])
    assert_native_matches(model, feeds, driver=driver)


def test_string_normalizer_refuses_a_2d_input_of_many_rows():
    model, feeds = one_node("StringNormalizer", 10, {"locale": "C.UTF-8"}, [_words((2, 3))])
    assert_native_matches(model, feeds)


CONCAT_CASES = [(_words((2, 3)), _words((2, 3))), (_words((2, 3)), _words(3)),
                (_words((4, 1)), _words((1, 5))), (_words(()), _words(4)),
                (_words((0, 3)), _words(3))]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("x, y", CONCAT_CASES,
                         ids=[f"{x.shape}{y.shape}" for x, y in CONCAT_CASES])
def test_string_concat_matches_onnxruntime(x, y, driver):
    model, feeds = one_node("StringConcat", 20, {}, [x, y])
    assert_native_matches(model, feeds, driver=driver)


SENTENCES = np.array([["a b  c", " lead and trail ", "", "a  b  c  "],
                      ["x,y,,z", ",", "tab\tand\nline", "banana"]], object)
SPLIT_CASES = [{}, {"delimiter": ","}, {"delimiter": " "}, {"maxsplit": 1},
               {"delimiter": ",", "maxsplit": 2}, {"delimiter": "an"}, {"delimiter": ""}]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("attrs", SPLIT_CASES, ids=str)
@pytest.mark.parametrize("x", [SENTENCES, SENTENCES[0], SENTENCES[:, :1], SENTENCES[:0]],
                         ids=["2x4", "4", "2x1", "0x4"])
def test_string_split_matches_onnxruntime(x, attrs, driver):
    model, feeds = one_node("StringSplit", 20, attrs, [x], n_outputs=2)
    assert_native_matches(model, feeds, driver=driver)


REGEX_CASES = [r"a", r"[a-c]+", r"(\w)b?", r".*", r"", r"b|bb", r"[^a-z]*", r"\d{2,}x?"]
TEXTS = np.array([["a", "abc", "bb", ""], ["12x", "1", "ÉÉ", "aa"]], object)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("pattern", REGEX_CASES)
def test_regex_full_match_matches_onnxruntime(pattern, driver):
    model, feeds = one_node("RegexFullMatch", 20, {"pattern": pattern}, [TEXTS])
    assert_native_matches(model, feeds, driver=driver)


def test_regex_full_match_on_an_empty_tensor_matches_onnxruntime():
    model, feeds = one_node("RegexFullMatch", 20, {"pattern": "a+"}, [TEXTS[:0]])
    assert_native_matches(model, feeds)
