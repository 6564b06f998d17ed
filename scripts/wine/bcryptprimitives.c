/* A stand-in bcryptprimitives.dll for running Windows test binaries under wine 8.0.
 *
 * Rust's std gets its random bytes (HashMap seeds) from ProcessPrng in bcryptprimitives.dll,
 * which wine 8.0 does not ship; a binary that cannot resolve it exits with status 53. This DLL
 * exports ProcessPrng and fills the buffer through SystemFunction036 (RtlGenRandom, advapi32),
 * which wine does implement. Built by scripts/test_windows.sh; never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    /* RtlGenRandom takes a ULONG length: feed larger requests in pieces. */
    while (length > 0) {
        ULONG piece = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, piece))
            return FALSE;
        data += piece;
        length -= piece;
    }
    return TRUE;
}
