// Types for the loaderx package (Node and browser entry points share them).

/** Every rejection is a LoaderxError with a stable `code`. */
export interface LoaderxError extends Error {
  name: 'LoaderxError';
  code:
    | 'LOADERX_NOT_FOUND' | 'LOADERX_NOT_A_STORE' | 'LOADERX_CORRUPT' | 'LOADERX_INDEX'
    | 'LOADERX_ARGUMENT' | 'LOADERX_TOO_LARGE' | 'LOADERX_IO' | 'LOADERX_NO_RANGE' | 'LOADERX_CLOSED';
  /** The record the error is about, when there is one. */
  index?: number;
}

export type TypedArray =
  | Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array
  | BigInt64Array | BigUint64Array | Float32Array | Float64Array;

/** A typed array with its logical shape. */
export type Shaped<T extends TypedArray = TypedArray> = T & { shape: number[] };

export interface Schema {
  kind: 'dense' | 'ragged';
  /** NumPy dtype string, e.g. `<f4`, `|u1`, `>i4`. */
  dtype: string;
  itemShape: number[];
  codec: 'raw' | 'zstd' | 'zstd_dict' | null;
  /** Typed array the values come in (float16 is widened to Float32Array, bool is Uint8Array). */
  arrayType: string;
  /** Trailing dimension added for complex (2), bytes/void (itemsize) and text (characters). */
  extraDim: number | null;
  itemBytes: number;
}

export interface Stats {
  records: number;
  liveBytes: number;
  logicalBytes: number;
  chunkBytes: number;
  reclaimable: number;
  compressionRatio: number;
  fileBytes: Record<string, number>;
  diskBytes: number;
  hasDict: boolean;
}

export interface VerifyReport {
  ok: boolean;
  checked: number;
  length: number;
  bad: { index: number; code: LoaderxError['code']; message: string }[];
}

/**
 * Where a store's bytes come from. `read` may return fewer bytes when the file ends early.
 * What a source gives is checked before wasm sees it; anything else is LOADERX_IO naming `label`.
 */
export interface Source {
  label: string;
  maxGap: number;
  /** A non-negative integer, or null when the file is missing. */
  size(name: string): Promise<number | null>;
  /** At most `end - start` bytes (an ArrayBuffer or other view is taken as its bytes), or null
   *  when the file is missing. */
  read(name: string, start: number, end: number): Promise<Uint8Array | ArrayBuffer | ArrayBufferView | null>;
  /** Optional: read [start, end) straight into `target` at `offset`; resolves to the bytes read
   *  (at most `end - start`), or null when the file is missing. */
  readInto?(name: string, start: number, end: number, target: Uint8Array, offset: number): Promise<number | null>;
  /** Bytes of recently read record ranges to keep (for slow sources such as HTTP). */
  cacheBytes?: number;
  close?(): void | Promise<void>;
}

export type Indices = ArrayLike<number> | Iterable<number>;

export declare class Store {
  /**
   * Node: a directory path, an http(s) URL, `{name: bytes}` or a Source.
   * Browser: a URL, FileList/File[], FileSystemDirectoryHandle, `{name: Blob|bytes}` or a Source;
   * `{worker: true}` decodes in a Web Worker, `{threads}` (default: cross-origin isolated) on a wasm pool.
   * Never throws: a value that makes no source rejects with LOADERX_ARGUMENT.
   */
  static open(source: unknown, options?: { worker?: boolean; threads?: boolean }): Promise<Store>;
  readonly length: number;
  readonly schema: Schema | null;
  readonly header: { version: number; tailChunk: number; tailOffset: number; length: number };
  readonly hasDict: boolean;
  /** Stores hosted in a worker: whether it decodes on the threaded build's pool. */
  readonly threaded?: boolean;
  /** Dense: one array shaped `[n, ...itemShape]`; ragged or schemaless: one array per record. */
  gather(indices: Indices): Promise<Shaped | Shaped[]>;
  get(index: number): Promise<Shaped>;
  /** Decoded record bytes, before dtype conversion. */
  gatherBytes(indices: Indices): Promise<Shaped<Uint8Array>[]>;
  lengths(indices: Indices): Promise<Float64Array>;
  /** `batchSize`: records per step (default 1024; fewer when records are big). Options that are
   *  not an object, or hold a bad `onProgress` / `batchSize`, are LOADERX_ARGUMENT. */
  verify(options?: { onProgress?: ((done: number, total: number) => void) | null; batchSize?: number } | null): Promise<VerifyReport>;
  stats(): Promise<Stats>;
  /** Closes the store (even when the source's close() fails: then it rejects, LOADERX_IO). */
  close(): Promise<void>;
}

export declare class Sampler {
  static Mode: { SEQUENTIAL: 0; IID: 1; CYCLIC: 2 };
  constructor(length: number | bigint, batchSize: number | bigint, mode: 0 | 1 | 2 | 'SEQUENTIAL' | 'IID' | 'CYCLIC', seed?: number | bigint);
  next(): Float64Array;
  batchAt(step: number | bigint): Float64Array;
  seek(step: number | bigint): void;
  readonly step: number;
  readonly batchLength: number;
  /** Releases the wasm memory; every later call throws LOADERX_CLOSED (free() again does nothing). */
  free(): void;
}

export declare class NodeSource implements Source { constructor(dir: string); label: string; maxGap: number; size(n: string): Promise<number | null>; read(n: string, s: number, e: number): Promise<Uint8Array | null>; }
export declare class HttpSource implements Source { constructor(base: string | URL, options?: { fetch?: typeof fetch; headers?: Record<string, string>; cacheBytes?: number }); label: string; maxGap: number; size(n: string): Promise<number | null>; read(n: string, s: number, e: number): Promise<Uint8Array | null>; }
/** `files`: bytes by name (any ArrayBufferView is taken as its bytes; null/undefined is a missing
 *  file); a value that is not bytes is LOADERX_ARGUMENT. */
export declare class MemorySource implements Source { constructor(files: Record<string, ArrayBuffer | ArrayBufferView | null | undefined> | Map<string, ArrayBuffer | ArrayBufferView | null | undefined>, label?: string); label: string; maxGap: number; size(n: string): Promise<number | null>; read(n: string, s: number, e: number): Promise<Uint8Array | null>; }
export declare class BlobSource implements Source { constructor(files: Map<string, Blob> | Record<string, Blob>, label?: string); static fromFiles(files: Iterable<File> | FileList): BlobSource; label: string; maxGap: number; size(n: string): Promise<number | null>; read(n: string, s: number, e: number): Promise<Uint8Array | null>; }
export declare function filesFromDataTransfer(dt: DataTransfer): Promise<BlobSource>;
export declare const threaded: boolean;
/** The loaderx version of the wasm build inside (equal to the package's version). */
export declare const version: string;
