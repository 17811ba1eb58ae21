// version.cpp - the runtime version getter.
#include "smx/smx_version.h"

extern "C" SMX_API int smxGetVersion(void) { return SMX_VERSION; }
