/*
 * A stand-in bcryptprimitives.dll for running Switchboard's Windows build
 * under Wine 8 in tests. Go 1.22 and later load ProcessPrng from
 * bcryptprimitives.dll at start, which Wine 8 lacks; this DLL exports it
 * on top of RtlGenRandom (advapi32's SystemFunction036), which Wine has.
 * Test-only: never installed with the product.
 */
#include <windows.h>

BOOLEAN NTAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size)
{
	while (size > 0) {
		ULONG n = size > 0x40000000 ? 0x40000000 : (ULONG)size;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		size -= n;
	}
	return TRUE;
}
