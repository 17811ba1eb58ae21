/* smx_export.h - the one macro that marks a symbol as part of libsmx's ABI.
 *
 * The library is built with hidden visibility; only declarations marked SMX_API
 * are exported. Consumers need not define anything. */
#ifndef SMX_EXPORT_H
#define SMX_EXPORT_H

#if defined(_WIN32)
#  if defined(SMX_BUILDING_LIBRARY)
#    define SMX_API __declspec(dllexport)
#  else
#    define SMX_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define SMX_API __attribute__((visibility("default")))
#else
#  define SMX_API
#endif

#ifdef __cplusplus
#  define SMX_EXTERN_C_BEGIN extern "C" {
#  define SMX_EXTERN_C_END }
#else
#  define SMX_EXTERN_C_BEGIN
#  define SMX_EXTERN_C_END
#endif

#endif /* SMX_EXPORT_H */
