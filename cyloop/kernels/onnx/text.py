"""Text: TfIdfVectorizer (n-gram counts of token ids or strings), StringNormalizer, StringConcat,
StringSplit and RegexFullMatch, as onnxruntime computes them. String tensors are numpy object
arrays of str; a string op works on their Python strings one by one (numpy has no vectorized
string type that keeps ONNX's arbitrary lengths without copies)."""

import re
import string

import numpy as np

from ..registry import kernel


def _token_ids(x, pool):
    """Each token of `x` as its index among the sorted distinct tokens of `pool`, or -1."""
    vocabulary = np.unique(pool)
    if x.dtype == object:
        table = {token: k for k, token in enumerate(vocabulary.tolist())}
        return np.fromiter((table.get(t, -1) for t in x.reshape(-1).tolist()), np.intp,
                           x.size).reshape(x.shape)
    if not vocabulary.size:
        return np.full(x.shape, -1, np.intp)
    index = np.clip(np.searchsorted(vocabulary, x), 0, vocabulary.size - 1)
    return np.where(vocabulary[index] == x, index, -1)


class _Pool:
    """TfIdfVectorizer's pool: for each n-gram length n, its n-grams (as rows of token ids) and
    the output column of each."""

    def __init__(self, attrs):
        strings = attrs.get("pool_strings")
        ints = attrs.get("pool_int64s")
        if (strings is None) == (ints is None):
            raise ValueError("TfIdfVectorizer needs one of pool_strings and pool_int64s")
        self.pool = np.array(list(strings), object) if strings is not None else \
            np.asarray(list(ints), np.int64)
        starts = [int(v) for v in attrs.get("ngram_counts", [])]
        indexes = np.asarray(list(attrs.get("ngram_indexes", [])), np.int64)
        self.width = int(indexes.max()) + 1 if indexes.size else 0
        self.min_n, self.max_n = int(attrs["min_gram_length"]), int(attrs["max_gram_length"])
        if not 1 <= self.min_n <= self.max_n:
            raise ValueError(f"TfIdfVectorizer: gram lengths {self.min_n}..{self.max_n}")
        ids = _token_ids(self.pool, self.pool)
        self.grams = {}  # n -> (rows of n token ids [M, n], their output columns [M])
        first = 0
        for k, start in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else self.pool.size
            n = k + 1
            rows = ids[start:end].reshape(-1, n)
            if first + len(rows) > indexes.size:
                raise ValueError(f"TfIdfVectorizer: {indexes.size} ngram_indexes for more "
                                 "n-grams in the pool")
            self.grams[n] = (rows, indexes[first:first + len(rows)])
            first += len(rows)


def _counts(pool, ids, max_skip):
    """[B, width] counts of the pool's n-grams in the rows of `ids` [B, N] (token ids, -1 for
    tokens not in the pool): each n-gram length of min_n..max_n, its items `d` apart for each
    d of 1..max_skip + 1, a unigram counted once (as onnxruntime's)."""
    rows, length = ids.shape
    counts = np.zeros((rows, pool.width), np.int64)
    for n in range(pool.min_n, pool.max_n + 1):
        if n not in pool.grams or not len(pool.grams[n][0]):
            continue
        grams, columns = pool.grams[n]
        for distance in range(1, (max_skip + 1 if n > 1 else 1) + 1):
            span = (n - 1) * distance
            starts = length - span
            if starts <= 0:
                break
            windows = np.stack([ids[:, k * distance:k * distance + starts] for k in range(n)],
                               axis=-1).reshape(-1, n)  # [B * starts, n]
            # Match each window to a pool n-gram: one sort of both sets of rows.
            _, inverse = np.unique(np.concatenate([grams, windows]), axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            column_of = np.full(inverse.max() + 1, -1, np.int64)
            column_of[inverse[:len(grams)][::-1]] = columns[::-1]  # (the first of repeats)
            found = column_of[inverse[len(grams):]]
            hit = found >= 0
            row = np.repeat(np.arange(rows), starts)[hit]
            np.add.at(counts, (row, found[hit]), 1)
    return counts


@kernel("TfIdfVectorizer", since=9)
def tf_idf_vectorizer(attrs):
    """TfIdfVectorizer-9: x [N] or [B, N] (int32, int64 or strings) -> float32 [width] or
    [B, width], width the largest ngram_indexes + 1: each pool n-gram's count (TF), its weight
    where it occurs (IDF), or their product (TFIDF), at its ngram_indexes column."""
    pool = _Pool(attrs)
    mode = attrs["mode"]
    if mode not in ("TF", "IDF", "TFIDF"):
        raise ValueError(f"TfIdfVectorizer's mode must be TF, IDF or TFIDF, got {mode!r}")
    max_skip = int(attrs.get("max_skip_count", 0))
    weights = attrs.get("weights")
    if weights is not None and len(weights):  # (the i-th n-gram's, at its column)
        by_column = np.ones(pool.width, np.float32)
        by_column[np.asarray(list(attrs["ngram_indexes"]), np.int64)] = list(weights)
        weights = by_column
    else:
        weights = None

    def vectorized(x):
        if x.ndim not in (1, 2):
            raise ValueError(f"TfIdfVectorizer takes [N] or [B, N], got shape {list(x.shape)}")
        if (x.dtype == object) != (pool.pool.dtype == object):
            raise ValueError(f"TfIdfVectorizer: a {x.dtype} input for a pool of "
                             f"{'strings' if pool.pool.dtype == object else 'int64s'}")
        if x.ndim == 2 and not x.shape[0]:  # (as onnxruntime)
            raise ValueError("TfIdfVectorizer takes [B, N] with B > 0, got B = 0")
        rows = x.reshape(1, -1) if x.ndim == 1 else x
        counts = _counts(pool, _token_ids(rows, pool.pool), max_skip)
        if mode == "TF":
            y = counts.astype(np.float32)
        elif mode == "IDF":
            y = (counts > 0).astype(np.float32)
        else:
            y = counts.astype(np.float32)
        if weights is not None and mode != "TF":
            y *= weights
        return y.reshape(-1) if x.ndim == 1 else y

    return vectorized


def _strings(fn, n_inputs=1, otype=object):
    """`fn` over the strings of its operands' elements (broadcast), as a numpy object ufunc."""
    ufunc = np.frompyfunc(fn, n_inputs, 1)

    def apply(*xs):
        result = ufunc(*xs)
        return np.asarray(result, object).astype(otype) if otype is not object else \
            np.asarray(result, object)

    return apply


@kernel("StringConcat", since=20)
def string_concat(attrs):
    """StringConcat-20: X + Y, element by element, broadcast."""
    return _strings(str.__add__, 2)


@kernel("RegexFullMatch", since=20)
def regex_full_match(attrs):
    """RegexFullMatch-20: whether each string matches `pattern` whole. Python's re runs the
    pattern (onnxruntime's RE2 syntax is, but for a few extensions, a subset of it)."""
    try:
        pattern = re.compile(attrs["pattern"])
    except re.error as e:
        raise ValueError(f"RegexFullMatch: bad pattern {attrs['pattern']!r}: {e}") from e
    return _strings(lambda s: pattern.fullmatch(s) is not None, otype=np.bool_)


def _split_at_spaces(s, maxsplit):
    """`s` split at runs of spaces (only " ", as onnxruntime's), leading and trailing ones
    dropped, at most `maxsplit` times (negative: no limit), the rest kept whole."""
    s = s.strip(" ")
    parts, at, length = [], 0, len(s)
    while True:
        while at < length and s[at] == " ":
            at += 1
        if at >= length:
            return parts
        end = s.find(" ", at)
        if end < 0 or len(parts) == maxsplit:
            parts.append(s[at:])
            return parts
        parts.append(s[at:end])
        at = end


@kernel("StringSplit", since=20, multi=True)
def string_split(attrs, n_outputs):
    """StringSplit-20: each string split at `delimiter` (as Python's str.split, but an empty
    string has no substring; unset or empty, at runs of spaces, leading and trailing ones
    dropped), at most `maxsplit` times ->
    (Y: X.shape + [the most substrings], padded with "", Z: int64 X.shape, the counts)."""
    delimiter = attrs.get("delimiter") or None
    maxsplit = attrs.get("maxsplit")
    maxsplit = -1 if maxsplit is None else int(maxsplit)

    def parts_of(s):
        if delimiter is not None:
            return s.split(delimiter, maxsplit) if s else []  # ("": no substring)
        return _split_at_spaces(s, maxsplit)

    def split(x):
        parts = [parts_of(s) for s in x.reshape(-1).tolist()]
        counts = np.fromiter(map(len, parts), np.int64, len(parts))
        width = int(counts.max()) if counts.size else 0
        y = np.full((len(parts), width), "", object)
        flat = np.empty(int(counts.sum()), object)
        flat[:] = [p for ps in parts for p in ps]
        y[np.arange(width) < counts[:, None]] = flat
        return y.reshape(*x.shape, width), counts.reshape(x.shape)

    return split


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_ASCII_UPPER = str.maketrans(string.ascii_lowercase, string.ascii_uppercase)


def _lower_char(c):
    lower = c.lower()
    return lower if len(lower) == 1 else lower[0]  # (U+0130: i and a combining dot)


def _upper_char(c):
    upper = c.upper()
    if len(upper) == 1:
        return upper
    title = c.title()  # (the simple mapping, where there is one: U+1FB3's is U+1FBC)
    return title if len(title) == 1 else c


def _lower(s):
    """`s` lower-cased a character at a time (towlower's simple mapping, not Python's full one:
    no final sigma, U+0130 one character)."""
    lower = s.lower()
    if len(lower) == len(s) and "\u03a3" not in s:
        return lower
    return "".join(map(_lower_char, s))


def _upper(s):
    """`s` upper-cased a character at a time (towupper's simple mapping: ß stays)."""
    upper = s.upper()
    return upper if len(upper) == len(s) else "".join(map(_upper_char, s))


@kernel("StringNormalizer", since=10)
def string_normalizer(attrs):
    """StringNormalizer-10: x [C] or [1, C] without its `stopwords` (compared in lower case
    unless is_case_sensitive), then lower- or upper-cased (case_change_action); where no string
    is left, one empty string ([1] or [1, 1]). Case maps a character at a time, as
    onnxruntime's towlower and towupper: ASCII letters only in locale C or POSIX, every
    letter with a one-character mapping in any other (Python's tables, not the locale's)."""
    action = attrs.get("case_change_action", "NONE")
    if action not in ("NONE", "LOWER", "UPPER"):
        raise ValueError(f"StringNormalizer's case_change_action must be NONE, LOWER or UPPER, "
                         f"got {action!r}")
    sensitive = bool(attrs.get("is_case_sensitive", 0))
    if attrs.get("locale") in ("C", "POSIX"):
        lower, upper = (lambda s: s.translate(_ASCII_LOWER)), (lambda s: s.translate(_ASCII_UPPER))
    else:
        lower, upper = _lower, _upper
    stopwords = list(attrs.get("stopwords", []))
    stop = set(stopwords) if sensitive else {lower(w) for w in stopwords}
    change = {"NONE": None, "LOWER": lower, "UPPER": upper}[action]

    def normalized(x):
        if not (x.ndim == 1 or x.ndim == 2 and x.shape[0] == 1):
            raise ValueError(f"StringNormalizer takes [C] or [1, C], got shape {list(x.shape)}")
        kept = [s for s in x.reshape(-1).tolist() if (s if sensitive else lower(s)) not in stop]
        if change is not None:
            kept = [change(s) for s in kept]
        if not kept:
            kept = [""]
        y = np.empty(len(kept), object)
        y[:] = kept
        return y if x.ndim == 1 else y.reshape(1, -1)

    return normalized
