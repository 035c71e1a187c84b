/* The bytes an n-d array's elements occupy, and whether two arrays' bytes overlap. */
#ifndef CYLOOP_EXTENT_H
#define CYLOOP_EXTENT_H

#include <stddef.h>
#include <stdint.h>

/* [*lo, *hi): the bytes of the elements of an array with this data pointer, shape, strides
 * (any sign) and item size; both NULL for an array of no elements. */
static inline void cyl_extent(char *data, int ndim, const intptr_t *shape,
                              const intptr_t *strides, intptr_t itemsize, char **lo, char **hi)
{
    int k;
    *lo = NULL;
    *hi = NULL;
    for (k = 0; k < ndim; k++) {
        if (shape[k] == 0) {
            return;
        }
    }
    *lo = data;
    *hi = data + itemsize;
    for (k = 0; k < ndim; k++) {
        intptr_t step = (shape[k] - 1) * strides[k];
        if (step < 0) {
            *lo += step;
        } else {
            *hi += step;
        }
    }
}

/* Whether [a_lo, a_hi) and [b_lo, b_hi) share a byte (an empty range shares none). */
static inline int cyl_ranges_overlap(const char *a_lo, const char *a_hi, const char *b_lo,
                                     const char *b_hi)
{
    return a_lo != NULL && b_lo != NULL && a_lo < b_hi && b_lo < a_hi;
}

#endif /* CYLOOP_EXTENT_H */
