// Types of the Node entry point (src/node.js).
import type { Bytes, DecodedImage, HttpOpenOptions, ImageHeader, ImageOptions, Source, StoreApi } from './common.js';

export * from './common.js';

/** What `Store.open` takes in Node. */
export type Openable =
  | string | URL | Source
  | Record<string, Bytes | null | undefined> | Map<string, Bytes | null | undefined>
  | Record<string, Blob> | Map<string, Blob>;

export interface Store extends StoreApi {}
export declare class Store {
  private constructor();
  /**
   * A directory path, a file: URL (string or URL), an http(s) URL, a Source, `{name: Blob}` or
   * `{name: bytes}`. `options.timeout` / `options.signal` go to a URL's HttpSource. Always a
   * promise: anything else (undefined, null, a number, a Promise, an ftp:// or s3:// URL, the
   * path of meta.zr or another file) rejects with LOADERX_ARGUMENT. A manifest (a directory
   * holding manifest.json, a `*.json` path or URL, or `{name: bytes}` holding manifest.json)
   * resolves to a `ManifestStoreApi` over its stores (see README, Manifests).
   */
  static open(source: Openable, options?: HttpOpenOptions): Promise<Store>;
}

/** A store directory on a local disk, read with positional reads. */
export declare class NodeSource implements Source {
  constructor(dir: string);
  label: string;
  maxGap: number;
  /**
   * Largest call (bytes) read on the calling thread with synchronous positional reads, when no
   * other call on the store is in flight (default 16 MiB; 0 reads everything on the thread pool).
   */
  syncLimit: number;
  /** Reads of one call in flight at once on the thread pool (default Infinity: all of them). */
  readConcurrency: number;
  /**
   * Smallest call (decoded bytes) a Store shares with its worker thread, which gathers part of
   * the records while the calling thread gathers the rest (default 1 MiB; Infinity: never, and
   * no worker starts). Results and errors are the same either way. Only a NodeSource itself, not
   * a subclass, shares.
   */
  workerMin: number;
  size(name: string): Promise<number | null>;
  read(name: string, start: number, end: number): Promise<Uint8Array | null>;
  readInto(name: string, start: number, end: number, target: Uint8Array, offset: number): Promise<number | null>;
  close(): Promise<void>;
}

/** Whether this build decodes on a wasm thread pool (the Node build: false). */
export declare const threaded: boolean;
/** The loaderx version of the wasm build inside (equal to the package's version). */
export declare const version: string;
/** The header of an encoded image (JPEG, PNG, WebP), decoding no pixels; throws LOADERX_CORRUPT
 * when the bytes are not an image. */
export declare function imageHeader(bytes: Uint8Array | ArrayBuffer | ArrayBufferView): ImageHeader;
/** Decodes an encoded image with the engine's pure-Rust decoders (as loaderx's wasm build does):
 * throws LOADERX_CORRUPT (damaged, truncated, not an image) or LOADERX_TOO_LARGE (over maxPixels). */
export declare function decodeImage(bytes: Uint8Array | ArrayBuffer | ArrayBufferView, options?: ImageOptions): DecodedImage;
/** Why an encoded image does not decode, or undefined when it does. */
export declare function imageProblem(bytes: Uint8Array | ArrayBuffer | ArrayBufferView, options?: ImageOptions): string | undefined;
