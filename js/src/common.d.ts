// Types shared by the Node (node.d.ts) and browser (browser.d.ts) entry points, and the classes
// both export. Each entry point declares its own Store.open.

export type LoaderxErrorCode =
  | 'LOADERX_NOT_FOUND' | 'LOADERX_NOT_A_STORE' | 'LOADERX_CORRUPT' | 'LOADERX_INDEX'
  | 'LOADERX_ARGUMENT' | 'LOADERX_TOO_LARGE' | 'LOADERX_IO' | 'LOADERX_NO_RANGE' | 'LOADERX_CLOSED';

/** Every rejection (and synchronous throw) of the package, including errors from wasm and from
 *  a worker: `e instanceof LoaderxError` holds. */
export declare class LoaderxError extends Error {
  constructor(code: LoaderxErrorCode, message: string, options?: ErrorFields);
  name: 'LoaderxError';
  code: LoaderxErrorCode;
  /** The record the error is about, when there is one. */
  index?: number;
  /** LOADERX_CORRUPT: the damaged file of the store (`meta.zr`, `3.zr`, `schema.msgpack`, …). */
  file?: string;
  /** LOADERX_CORRUPT: the byte offset in `file`, when known. */
  offset?: number;
}

/** Optional fields of a LoaderxError. */
export interface ErrorFields { cause?: unknown; index?: number; file?: string; offset?: number }

/** Builds a LoaderxError (the same as `new LoaderxError(code, message, extra)`). */
export declare function loaderxError(code: LoaderxErrorCode, message: string, extra?: ErrorFields): LoaderxError;

export type TypedArray =
  | Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array
  | BigInt64Array | BigUint64Array | Float32Array | Float64Array;

/** A typed array with its logical shape. */
export type Shaped<T extends TypedArray = TypedArray> = T & { shape: number[] };

export type ArrayTypeName =
  | 'Int8Array' | 'Uint8Array' | 'Int16Array' | 'Uint16Array' | 'Int32Array' | 'Uint32Array'
  | 'BigInt64Array' | 'BigUint64Array' | 'Float32Array' | 'Float64Array';

export interface Schema {
  kind: 'dense' | 'ragged';
  /** NumPy dtype string, e.g. `<f4`, `|u1`, `>i4`. */
  dtype: string;
  itemShape: number[];
  codec: 'raw' | 'zstd' | 'zstd_dict' | null;
  /** Typed array the values come in (float16 is widened to Float32Array, bool is Uint8Array). */
  arrayType: ArrayTypeName;
  /** Trailing dimension added for complex (2), bytes/void (itemsize) and text (characters). */
  extraDim: number | null;
  /** Bytes of one item (`itemShape` elements) as stored. */
  itemBytes: number;
  /** A store of encoded images (Python's `from_images`): the format of its records. */
  media?: 'jpeg' | 'png' | 'webp' | 'mixed';
}

/** What `dtypeInfo(schema)` says about a store's values. */
export interface DtypeInfo {
  /** NumPy kind letter (u i f c b S U V M m), or 'raw' for a store without a schema. */
  kind: 'u' | 'i' | 'f' | 'c' | 'b' | 'S' | 'U' | 'V' | 'M' | 'm' | 'raw' | (string & {});
  /** Bytes of one element as stored. */
  bytes: number;
  /** For people: `uint8`, `float32, big-endian`, `datetime64[ns]`, ... */
  name: string;
  bigEndian: boolean;
  /** Datetime/timedelta unit (`ns`, `D`, ...), or null. */
  unit: string | null;
  arrayType: ArrayTypeName;
  extraDim: number | null;
  /** Whether each element of the typed array is one plain number (integers, floats, bool). */
  numeric: boolean;
}

/** The typed-array mapping of a schema, for display (the viewer uses it). */
export declare function dtypeInfo(schema: Schema | null): DtypeInfo;

export interface Stats {
  records: number;
  liveBytes: number;
  logicalBytes: number;
  chunkBytes: number;
  reclaimable: number;
  compressionRatio: number;
  /**
   * Bytes the store's files hold: meta.zr up to the end of its table (16 + 16 · length),
   * schema.msgpack and dict.zr, and each chunk file up to the append frontier (each at most the
   * file's size). About what the native `loaderx stats` reports as on disk; the figure to show.
   */
  usedBytes: number;
  /** What each file holds, by name (`<store>/<file>` for a manifest): the live table of meta.zr,
   *  the written part of each chunk, all of the other files; never more than the file. */
  usedFileBytes: Record<string, number>;
  /** Apparent size of each file the store has (a missing dict.zr or schema.msgpack is absent). */
  fileBytes: Record<string, number>;
  /** The sum of `fileBytes`: the files' apparent size, which counts the space preallocated
   *  chunk files (4 GiB each) and meta.zr reserve before it is written. */
  apparentBytes: number;
  hasDict: boolean;
}

/** An exclusion mask (see loaderx.mask in Python): which records of one store training skips. */
export declare class Mask {
  /** Reads a mask file (LOADERX_CORRUPT when damaged). */
  constructor(bytes: Bytes);
  /** A mask of `store` excluding `indices` (LOADERX_INDEX past the end). */
  static build(store: { length: number; maskIdentity(): Promise<string> }, indices: Iterable<number>): Promise<Mask>;
  /** Rejects with LOADERX_ARGUMENT for a store the mask was not made for. */
  check(store: { length: number; maskIdentity(): Promise<string> }): Promise<void>;
  /** The records at positions `indices` of the kept records (each below `kept`). */
  select(indices: Indices): Float64Array;
  isExcluded(index: number): boolean;
  toBytes(): Uint8Array;
  readonly length: number;
  readonly excluded: number;
  readonly kept: number;
  /** `sha256:<hex>` of the store the mask is for. */
  readonly identity: string;
  free(): void;
}

/** The records a run fed each rank at a step (see stepRecords). A packed run adds `rows`: each
 *  rank's rows as `[record, first token, tokens]` segments in column order, and its `ranks` list
 *  the records those rows hold, in order of first appearance. */
export interface StepRecords {
  step: number;
  shardCount: number;
  ranks: number[][];
  global: number[];
  rows?: [number, number, number][][][];
}

export interface StepRecordsOptions {
  /** The run's exclusion mask (a run with one needs it). */
  mask?: Mask | null;
  /** A mix's masks, one (or null) per source, for a mix sampled through masks per source. */
  masks?: (Mask | null)[] | null;
  /** `sha256:` of the mask file, checked against the run's (`digests`: one per source). */
  digest?: string | null;
  digests?: (string | null)[] | null;
  /** A packed run's document lengths in tokens (every record of the store, masked ones too); a
   *  packed mix's, one list per source. */
  lengths?: ArrayLike<number> | ArrayLike<number>[] | null;
}

/**
 * Which records a training run fed each rank at `step`, from its receipt (`DataLoader.receipt()`)
 * or a loader state (`state_dict()`), by the core sampler, mixer and packer (Python's
 * `loaderx.receipt.indices`). Indices of a mix are into its sources joined in order.
 */
export declare function stepRecords(run: unknown, step: number, options?: StepRecordsOptions): StepRecords;

/**
 * The records of aligned streams (name -> store, one length) that match `text`, ascending: a
 * filter such as `label == 3 && len(tokens) > 512` (core's filter language; a name is a stream of
 * one number per record, `len(name)` a record's length in rows). LOADERX_ARGUMENT for a syntax
 * error (with its position), an unknown name or a stream that is not one number per record.
 */
export declare function filterRecords(
  streams: Record<string, StoreApi | ManifestStoreApi>,
  text: string,
  options?: { batchSize?: number; onProgress?: ((done: number, total: number, found: number) => void) | null; signal?: AbortSignal | null },
): Promise<Float64Array>;

export interface ProfileOptions {
  /** Histogram bins (default 20, at most 4096). */
  bins?: number;
  /** Records per batch (default 4096; fewer when records are big). */
  batchSize?: number;
  /** After each batch: records done, of `total`, in pass 1 (all statistics) or 2 (histograms). */
  onProgress?: ((done: number, total: number, pass: number) => void) | null;
  signal?: AbortSignal | null;
}

/** NumPy's `np.histogram(values_as_float64, bins, range=(min, max))`: `bins + 1` edges, each bin
 *  `[lo, hi)` but the last `[lo, hi]`. */
export interface Histogram { edges: number[]; counts: number[] }

/** One channel (the last axis when a record has two or more axes and it has at most 8 entries). */
export interface ProfileChannel {
  /** Finite values. */
  count: number;
  nan: number;
  posInf: number;
  negInf: number;
  /** Over the finite values (null without any); std is the population deviation (ddof=0). */
  min: number | null;
  max: number | null;
  mean: number | null;
  std: number | null;
  histogram: Histogram | null;
}

export interface CodecBytes { codec: string; records: number; storedBytes: number; decodedBytes: number }

/** Record indices: the exact count and the first 1000. */
export interface Listed { count: number; indices: number[] }

export interface Profile {
  records: number;
  /** Empty when the records are not numbers (bytes, text, encoded images). */
  channels: ProfileChannel[];
  /** `[value, count]` ascending, for integer or bool scalar streams with at most 1024 values. */
  valueCounts: [number, number][] | null;
  /** A scalar integer stream with more than 1024 distinct values (no counts kept). */
  distinctOver: boolean;
  /** Ragged streams: record lengths in rows. */
  lengths: { min: number; max: number; mean: number; histogram: Histogram } | null;
  nanRecords: Listed;
  /** Groups of records with equal decoded bytes (by a 128-bit content hash). */
  duplicates: { groups: number; extraRecords: number; listed: number[][] };
  /** Records whose bytes are not a whole number of rows (left out of value statistics). */
  misfit: Listed;
  codecs: CodecBytes[];
}

export interface VerifyReport {
  ok: boolean;
  checked: number;
  length: number;
  bad: { index: number; code: LoaderxErrorCode; message: string }[];
  /** Bad records counted but not listed in `bad`: the rest of a blank run that ends the table
   *  (a damaged record count), whose first record is in `bad`. */
  unlisted: number;
  /** Records whose checksum (checksums.lx) matched, did not (listed in `bad`), that have none,
   *  and whose checksum did not match in a table another writer changed since (not damage). */
  checksums: { verified: number; mismatched: number; uncovered: number; unverified: number };
}

/** Which reads are checked against a store's per-record checksums (checksums.lx): 'fetched'
 *  (the default) checks what comes over HTTP, 'always' every read. */
export type VerifyMode = 'off' | 'fetched' | 'always';

/** Bytes as the package takes them: a Uint8Array, an ArrayBuffer or any other view. */
export type Bytes = ArrayBuffer | ArrayBufferView;

/**
 * Where a store's bytes come from: `size` and `read` are all a source needs. `read` may return
 * fewer bytes when the file ends early. What a source gives is checked before wasm sees it;
 * anything else is LOADERX_IO naming `label`.
 */
export interface Source {
  /** A non-negative integer, or null when the file is missing. */
  size(name: string): Promise<number | null>;
  /** At most `end - start` bytes (an ArrayBuffer or other view is taken as its bytes), or null
   *  when the file is missing. */
  read(name: string, start: number, end: number): Promise<Bytes | null>;
  /** For messages (default "the source"). */
  label?: string;
  /** Bytes between two records small enough to read in one request with them (default 0). */
  maxGap?: number;
  /** Read [start, end) straight into `target` at `offset`; resolves to the bytes read (at most
   *  `end - start`), or null when the file is missing. */
  readInto?(name: string, start: number, end: number, target: Uint8Array, offset: number): Promise<number | null>;
  /** Bytes of recently read record ranges to keep (for slow sources such as HTTP). */
  cacheBytes?: number;
  close?(): void | Promise<void>;
  /**
   * Browser only: a structured-clonable description that rebuilds the source in a worker. A
   * source without one (or whose descriptor() throws) opens on the calling thread; asking for
   * `{worker: true}` or `{threads: true}` with it is LOADERX_ARGUMENT.
   */
  descriptor?(): unknown;
}

/** Record indices: numbers or bigints, in any list (Array, typed array, Set, generator) or
 *  array-like (`{length: 2, 0: 3, 1: 1}`). */
export type Indices = ArrayLike<number | bigint> | Iterable<number | bigint>;

/** What `batches` yields for each `read`. */
export interface BatchKinds {
  values: Shaped | Shaped[];
  bytes: Shaped<Uint8Array>[];
  lengths: Float64Array;
}

/** `store.batches(options)`: slices of `indices` (default: every record in order) of
 *  `batchSize` (default 1024), or the batches of `sampler` from its current step (then no
 *  `batchSize`; endless without `steps`). */
export type BatchOptions<R extends keyof BatchKinds = 'values'> = {
  /** What each batch is: `gather` (values, the default), `gatherBytes` (bytes) or `lengths`. */
  read?: R;
  /** At most this many batches. */
  steps?: number;
} & ({ batchSize?: number; indices?: Indices; sampler?: undefined } | { sampler: Sampler; batchSize?: undefined; indices?: undefined });

export interface VerifyOptions {
  onProgress?: ((done: number, total: number) => void) | null;
  /** Records per step (default 1024; fewer when records are big). */
  batchSize?: number;
}

/** What `Store.open` gives for a manifest: a store's API over the stores it lists, read as one
 *  (`header` holds only the stores' format `version` and the `length`). */
export interface ManifestStoreApi extends Omit<StoreApi, 'header'> {
  readonly header: { version: number; length: number };
  /** The stores as listed, in order. */
  readonly stores: { path: string; length: number }[];
}

/** The API of an open store (on this thread or, in a browser, hosted in a worker). */
export interface StoreApi {
  /** Live records. */
  readonly length: number;
  readonly schema: Schema | null;
  readonly header: { version: number; tailChunk: number; tailOffset: number; length: number };
  readonly hasDict: boolean;
  /** Dense: one array shaped `[n, ...itemShape]`; ragged or schemaless: one array per record. */
  gather(indices: Indices): Promise<Shaped | Shaped[]>;
  get(index: number | bigint): Promise<Shaped>;
  /** Decoded record bytes, before dtype conversion. */
  gatherBytes(indices: Indices): Promise<Shaped<Uint8Array>[]>;
  lengths(indices: Indices): Promise<Float64Array>;
  /** Gathered batches in order (`for await`); bad options reject the first step (LOADERX_ARGUMENT).
   *  With a sampler, the sampler is left at the step after the last batch yielded. */
  batches<R extends keyof BatchKinds = 'values'>(options?: BatchOptions<R> | null): AsyncGenerator<BatchKinds[R], void, undefined>;
  /** Options that are not an object, or hold a bad `onProgress` / `batchSize`, are LOADERX_ARGUMENT. */
  verify(options?: VerifyOptions | null): Promise<VerifyReport>;
  stats(): Promise<Stats>;
  /** Whole-store statistics: every record read once, numeric stores twice (value histograms).
   *  Bad options are LOADERX_ARGUMENT; an aborted `signal` rejects with the signal's reason. */
  profile(options?: ProfileOptions | null): Promise<Profile>;
  /** Records, stored and decoded bytes per codec, from the table (no record is read). */
  codecBytes(): Promise<CodecBytes[]>;
  /** The identity exclusion masks are made for (`sha256:<hex>`), as the native engine computes it. */
  maskIdentity(): Promise<string>;
  /** The content digest (`sha256:…`) from the schema, dictionary, table and checksums, or null
   *  unless checksums cover every record. */
  digest(): Promise<string | null>;
  /** What the checksums cover, from the table and checksums.lx (no record is read). */
  checksums(): Promise<{ present: boolean; covered: number; total: number; digest: string | null }>;
  /** Which reads are checked ('mixed' for a manifest whose stores differ). */
  readonly verifyMode: VerifyMode | 'mixed';
  /** Changes which reads are checked (LOADERX_ARGUMENT for another value). */
  setVerify(mode: VerifyMode): void;
  /** Closes the store (even when the source's close() fails: then it rejects, LOADERX_IO). */
  close(): Promise<void>;
}

type ModeName = 'SEQUENTIAL' | 'IID' | 'CYCLIC';
/** A mode number, or its name in upper, lower or capitalized case. */
export type SamplerMode = 0 | 1 | 2 | ModeName | Lowercase<ModeName> | Capitalize<Lowercase<ModeName>>;

/** Endless batches of indices; the same arguments give the same batches in every front end. */
export declare class Sampler {
  static Mode: { SEQUENTIAL: 0; IID: 1; CYCLIC: 2 };
  constructor(length: number | bigint, batchSize: number | bigint, mode: SamplerMode, seed?: number | bigint);
  next(): Float64Array;
  batchAt(step: number | bigint): Float64Array;
  seek(step: number | bigint): void;
  readonly step: number;
  readonly batchLength: number;
  /** Releases the wasm memory; every later call throws LOADERX_CLOSED (free() again does nothing). */
  free(): void;
}

/** One run of tokens in a packed row: tokens `offset .. offset + len` of document `doc` at
 *  columns `col .. col + len` of `row`. */
export interface PackedSegment {
  row: number;
  col: number;
  len: number;
  doc: number;
  offset: number;
}

export interface PackOptions {
  seqLen: number;
  /** 'concat' (default): one token stream cut into rows; 'best_fit': whole documents. */
  packing?: 'concat' | 'best_fit';
  /** Rows best_fit keeps open (default 128). */
  bins?: number;
  /** The document order (default 'CYCLIC'). */
  mode?: SamplerMode;
  seed?: number | bigint;
}

/** Packed rows planned by loaderx-core exactly as Python's `DataLoader.packed` plans them. */
export declare class Packer {
  constructor(lengths: ArrayLike<number>, options: PackOptions);
  segments(first: number | bigint, rows: number | bigint): PackedSegment[];
  epochRows(epoch: number | bigint): number | undefined;
  readonly tokens: number;
  readonly documents: number;
  /** Releases the wasm memory; every later call throws LOADERX_CLOSED (free() again does nothing). */
  free(): void;
}

export interface HttpOptions {
  /** A custom fetch. A function cannot be sent to a worker: such a source opens on the calling
   *  thread, and `{worker: true}` / `{threads: true}` with it is LOADERX_ARGUMENT. */
  fetch?: typeof fetch;
  headers?: Record<string, string>;
  /** Bytes of recently read record ranges kept (default 64 MiB). */
  cacheBytes?: number;
  /** Milliseconds each request (answer and body) may take (default 30 000; Infinity: no limit);
   *  past it the call rejects with LOADERX_IO naming the URL. */
  timeout?: number;
  /** Aborts the requests in flight and every later one (LOADERX_IO naming the URL). It cannot
   *  be sent to a worker: such a source opens on the calling thread, as with `fetch`. */
  signal?: AbortSignal;
}

/** `Store.open` options: `timeout` and `signal` reach the HttpSource made of a URL. */
export interface HttpOpenOptions {
  timeout?: number;
  signal?: AbortSignal;
  /** Which reads are checked against the checksums (default 'fetched'). */
  verify?: VerifyMode;
}

/** `text` with the userinfo and query values of every http(s)/s3/gs/az URL in it replaced by
 *  `***` (`http://***@host/x?sig=***`), as the package shows URLs everywhere. */
export declare function redactUrl(text: string | URL): string;

/** A store over HTTP(S), read with single-range GETs (a server answering 200 is LOADERX_NO_RANGE). */
/** What every built-in source has (declared once, merged into each class below). */
export interface BuiltinSource extends Source {
  label: string;
  maxGap: number;
  size(name: string): Promise<number | null>;
  read(name: string, start: number, end: number): Promise<Uint8Array | null>;
  descriptor(): unknown;
  close(): void;
}

export interface HttpSource extends BuiltinSource {}
export declare class HttpSource {
  constructor(base: string | URL, options?: HttpOptions);
  cacheBytes: number;
  timeout: number;
  signal: AbortSignal | null;
  /** LOADERX_ARGUMENT with a custom fetch. */
  descriptor(): unknown;
  /** Cuts the requests in flight short (each fails with LOADERX_IO, "interrupted"); later
   *  requests go ahead. */
  interrupt(): void;
}

/** `files`: bytes by name (any ArrayBufferView is taken as its bytes; null/undefined is a missing
 *  file); a value that is not bytes is LOADERX_ARGUMENT. */
export interface MemorySource extends BuiltinSource {}
export declare class MemorySource {
  constructor(files: Record<string, Bytes | null | undefined> | Map<string, Bytes | null | undefined>, label?: string);
  readInto(name: string, start: number, end: number, target: Uint8Array, offset: number): Promise<number>;
}

/** Blobs (or Files) by name, read with `Blob.slice` (Node has Blob too). */
export interface BlobSource extends BuiltinSource {}
export declare class BlobSource {
  constructor(files: Map<string, Blob> | Record<string, Blob>, label?: string);
  /** The store among picked files: the directory holding the shallowest `meta.zr`. */
  static fromFiles(files: Iterable<File> | ArrayLike<File>): BlobSource;
}

/** What an encoded image's header says. */
export interface ImageHeader {
  /** 'jpeg', 'png' or 'webp'. */
  media: 'jpeg' | 'png' | 'webp';
  /** Width and height in display orientation (after the EXIF orientation). */
  width: number;
  height: number;
  /** The EXIF orientation, 1 (as stored) to 8. */
  orientation: number;
}

/** A decoded picture: `height` rows of `width` RGB pixels. */
export interface DecodedImage {
  width: number;
  height: number;
  rgb: Uint8Array;
}

export interface ImageOptions {
  /** The largest image (width x height) decoded (default: Pillow's decompression-bomb limit). */
  maxPixels?: number;
}
