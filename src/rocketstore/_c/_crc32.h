/* CRC-32 (zlib/gzip, reflected polynomial 0xEDB88320) with a PCLMULQDQ
 * fast path on x86 and a slicing-by-8 table fallback everywhere else. */
#ifndef RS_CRC32_H
#define RS_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* Build the tables and detect the CPU. Call once before any other function;
 * returns 0. */
int rs_crc32_init(void);

/* Same contract as zlib's crc32(crc, buf, len): crc is the previous final
 * value (0 to start) and the return value is the new final value. */
uint32_t rs_crc32(uint32_t crc, const unsigned char *buf, size_t len);

/* As rs_crc32, but always uses the portable table code (for tests). */
uint32_t rs_crc32_portable(uint32_t crc, const unsigned char *buf, size_t len);

#endif
