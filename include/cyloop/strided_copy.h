/* Strided copy of an n-d block between two arrays of the same shape and itemsize.
 *
 * The innermost axes whose strides are contiguous in both source and destination are merged into
 * one run, copied with a single memcpy; the outer axes are walked with an index counter. When even
 * the last axis is not contiguous the run is one element (general strides).
 */
#ifndef CYLOOP_STRIDED_COPY_H
#define CYLOOP_STRIDED_COPY_H

#include <stddef.h>
#include <string.h>

#define CYL_MAX_NDIM 64

/* Returns 0 on success, -1 when ndim exceeds CYL_MAX_NDIM (nothing is copied then). */
static inline int cyl_strided_copy(char *dst, const ptrdiff_t *dst_strides, const char *src,
                                   const ptrdiff_t *src_strides, const ptrdiff_t *shape, int ndim,
                                   ptrdiff_t itemsize)
{
    ptrdiff_t run = itemsize;
    ptrdiff_t index[CYL_MAX_NDIM];
    int outer = ndim;
    int k;

    if (ndim > CYL_MAX_NDIM) {
        return -1;
    }
    for (k = 0; k < ndim; k++) {
        if (shape[k] == 0) {
            return 0;
        }
    }
    /* Merge trailing axes while both sides are contiguous over them. */
    while (outer > 0 && dst_strides[outer - 1] == run && src_strides[outer - 1] == run) {
        run *= shape[outer - 1];
        outer--;
    }
    if (outer == 0) {
        memcpy(dst, src, (size_t)run);
        return 0;
    }
    for (k = 0; k < outer; k++) {
        index[k] = 0;
    }
    for (;;) {
        memcpy(dst, src, (size_t)run);
        /* Odometer increment over the outer axes, moving both pointers. */
        k = outer - 1;
        for (;;) {
            index[k]++;
            dst += dst_strides[k];
            src += src_strides[k];
            if (index[k] < shape[k]) {
                break;
            }
            dst -= dst_strides[k] * shape[k];
            src -= src_strides[k] * shape[k];
            index[k] = 0;
            if (k == 0) {
                return 0;
            }
            k--;
        }
    }
}

#endif /* CYLOOP_STRIDED_COPY_H */
