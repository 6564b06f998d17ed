// Behaviour that arrives with the next js/pkg build (wasm/src changes): until js/pkg is rebuilt
// from them, the tests pinning it run as `todo` (reported, not failing the run), and property
// tests accept today's answer as well. Once the build is in, set WASM_REBUILT to true (or delete
// this file and the conditions on it).
export const WASM_REBUILT = true;

/** meta.zr shorter than its 16-byte header: LOADERX_CORRUPT in every front end (was NOT_A_STORE in wasm). */
export const SHORT_META = {
  todo: WASM_REBUILT ? false : 'needs js/pkg rebuilt with the wasm rule: a meta.zr under 16 bytes is LOADERX_CORRUPT',
  /** Codes a property test accepts for a meta.zr of 0..15 bytes. */
  codes: WASM_REBUILT ? ['LOADERX_CORRUPT'] : ['LOADERX_CORRUPT', 'LOADERX_NOT_A_STORE'],
};
