/* Error values shared by every halo API: functions that can fail return a halo_status and
 * fill a halo_error whose message names the file, tensor, key or request at fault. */
#ifndef HALO_STATUS_H
#define HALO_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum halo_status {
    HALO_OK = 0,
    HALO_E_INVALID_ARG,  /* caller passed something unusable */
    HALO_E_NOMEM,        /* allocation failed */
    HALO_E_IO,           /* open/read/write failed at the OS level */
    HALO_E_BAD_MAGIC,    /* not a GGUF file */
    HALO_E_BAD_VERSION,  /* GGUF version halo does not read */
    HALO_E_TRUNCATED,    /* file ends before a structure it declares */
    HALO_E_OVERFLOW,     /* a count, length or size product overflows */
    HALO_E_BAD_VALUE,    /* a value is out of its allowed range (alignment, n_dims, type id) */
    HALO_E_UNKNOWN_TYPE, /* unknown metadata value type or tensor type */
    HALO_E_DUPLICATE,    /* duplicate key or tensor name */
    HALO_E_OUT_OF_BOUNDS,/* tensor data outside the file's data section */
    HALO_E_MISALIGNED,   /* tensor data offset not a multiple of the alignment */
    HALO_E_OVERLAP,      /* two tensors' data overlap */
    HALO_E_NOT_FOUND,    /* key, tensor or file not present */
    HALO_E_TYPE_MISMATCH,/* key present with another type than requested */
    HALO_E_SHARDS,       /* split model shards missing or inconsistent */
    HALO_E_UNSUPPORTED,  /* valid input that halo does not handle (yet) */
} halo_status;

typedef struct halo_error {
    halo_status status;
    char message[512];
} halo_error;

/* Short stable name of a status ("truncated", "bad-magic", ...). */
const char *halo_status_name(halo_status status);

#ifdef __cplusplus
}
#endif
#endif
