/* smx_status.h - status codes returned by every smx function, and how to read them.
 *
 * Codes are grouped by thousands and never renumbered:
 *   0       success
 *   2000s   a bad parameter: the call was refused and changed nothing
 *   3000s   valid, but not supported by this build, device or dtype pair
 *   4000s   internal failure or allocation failure
 *   5000s   execution failed on the device (a CUDA error)
 * After any failure, smxGetLastErrorMessage() says exactly what was wrong. */
#ifndef SMX_STATUS_H
#define SMX_STATUS_H

#include "smx_export.h"

SMX_EXTERN_C_BEGIN

typedef enum smxStatus_t {
    SMX_STATUS_SUCCESS = 0,

    SMX_STATUS_BAD_PARAM = 2000,              /**< a parameter is invalid (generic) */
    SMX_STATUS_BAD_PARAM_NULL_POINTER = 2001, /**< a required pointer is NULL */
    SMX_STATUS_BAD_PARAM_DTYPE = 2002,        /**< not an smxDataType_t value */
    SMX_STATUS_BAD_PARAM_NDIM = 2003,         /**< ndim outside 1..SMX_MAX_DIMS */
    SMX_STATUS_BAD_PARAM_SHAPE = 2004,        /**< a negative dim, a too-large shape, or y's shape != x's */
    SMX_STATUS_BAD_PARAM_STRIDES = 2005,      /**< the strides' extent overflows int64 */
    SMX_STATUS_BAD_PARAM_AXIS = 2006,         /**< axis outside [-ndim, ndim) */
    SMX_STATUS_BAD_PARAM_OVERLAP = 2007,      /**< y overlaps itself, or partially overlaps x */
    SMX_STATUS_BAD_PARAM_WORKSPACE = 2008,    /**< workspace smaller than the size queried */
    SMX_STATUS_BAD_PARAM_MODE = 2009,         /**< not an smxSoftmaxMode_t value */
    SMX_STATUS_BAD_PARAM_DEVICE = 2010,       /**< bad device type or id, or data on another device */
    SMX_STATUS_BAD_PARAM_ALIGNMENT = 2011,    /**< a data pointer not aligned to its element size */
    SMX_STATUS_BAD_PARAM_OBJECT = 2012,       /**< not a live smx object of the kind the argument takes */

    SMX_STATUS_NOT_SUPPORTED = 3000,               /**< valid, but not supported (generic) */
    SMX_STATUS_NOT_SUPPORTED_DEVICE_ABSENT = 3001, /**< no such device on this machine */
    SMX_STATUS_NOT_SUPPORTED_BACKEND_NOT_BUILT = 3002, /**< library built without that backend */
    SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR = 3003,    /**< the (x dtype, y dtype) pair is not offered */

    SMX_STATUS_INTERNAL_ERROR = 4000,   /**< a bug in smx: please report it with the message */
    SMX_STATUS_ALLOC_FAILED = 4001,     /**< host memory could not be allocated */

    SMX_STATUS_EXECUTION_FAILED = 5000  /**< a CUDA call or launch failed; the message holds CUDA's text */
} smxStatus_t;

/** The category of a status: its code rounded down to the thousand (0, 2000, 3000, 4000, 5000). */
#define SMX_STATUS_CATEGORY(status) ((int)(status) / 1000 * 1000)

/** A short, static, human-readable name for a status ("SMX_STATUS_BAD_PARAM_AXIS: axis out of range").
 *  Unknown codes give a string starting "SMX_STATUS_UNKNOWN". Never returns NULL; the string must not be
 *  freed. */
SMX_API const char* smxGetStatusString(smxStatus_t status);

/** The detail of the last failure on the calling thread ("axis 3 out of range for a 2-d tensor").
 *  Each smx call that fails overwrites it; calls that succeed leave it alone. Empty when no call on this
 *  thread has failed. The string lives in thread-local storage until the next failing call on this
 *  thread; copy it to keep it. Never returns NULL. */
SMX_API const char* smxGetLastErrorMessage(void);

SMX_EXTERN_C_END

#endif /* SMX_STATUS_H */
