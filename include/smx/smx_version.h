/* smx_version.h - the library version, three ways: macros, one integer, a runtime getter. */
#ifndef SMX_VERSION_H
#define SMX_VERSION_H

#include "smx_export.h"

#define SMX_VERSION_MAJOR 0
#define SMX_VERSION_MINOR 1
#define SMX_VERSION_PATCH 0

/** The version as one integer: MAJOR*10000 + MINOR*100 + PATCH. */
#define SMX_VERSION (SMX_VERSION_MAJOR * 10000 + SMX_VERSION_MINOR * 100 + SMX_VERSION_PATCH)

SMX_EXTERN_C_BEGIN

/** Returns SMX_VERSION of the library actually loaded, which may differ from the
 *  header a program was compiled against. Never fails. */
SMX_API int smxGetVersion(void);

SMX_EXTERN_C_END

#endif /* SMX_VERSION_H */
