// Types of the browser entry point (src/browser.js).
import type { BlobSource, BuiltinSource, Bytes, DecodedImage, HttpOpenOptions, ImageHeader, ImageOptions, Source, StoreApi } from './common.js';

export * from './common.js';

/** What `Store.open` takes in a browser. */
export type Openable =
  | string | URL | Source | FileList | File[] | FileSystemDirectoryHandle
  | Record<string, Blob | Bytes | null | undefined> | Map<string, Blob | Bytes | null | undefined>;

export interface OpenOptions extends HttpOpenOptions {
  /** Host the store in a Web Worker (decoding off this thread). */
  worker?: boolean;
  /** Decode on the threaded build's wasm pool in a worker (default: when the page is
   *  cross-origin isolated). A source that cannot move to a worker (no `descriptor()`, or an
   *  HttpSource with a custom fetch) then opens on this thread, unless `worker` or `threads`
   *  was asked for: then LOADERX_ARGUMENT. */
  threads?: boolean;
}

export interface Store extends StoreApi {
  /** Stores hosted in a worker: whether it decodes on the threaded build's pool. */
  readonly threaded?: boolean;
  /** Stores hosted in a worker: cuts the HTTP requests in flight short (they fail with
   *  LOADERX_IO); later calls read as before. */
  interrupt?(): void;
}
export declare class Store {
  private constructor();
  /** Always a promise: a value that makes no source rejects with LOADERX_ARGUMENT. A manifest
   *  (its URL, picked files holding manifest.json, `{name: Blob|bytes}` holding it) resolves to
   *  a `ManifestStoreApi` over its stores (see README, Manifests). */
  static open(source: Openable, options?: OpenOptions): Promise<Store>;
}

/** Reads from a FileSystemDirectoryHandle (showDirectoryPicker, Chromium). */
export interface DirectoryHandleSource extends BuiltinSource {}
export declare class DirectoryHandleSource {
  constructor(handle: FileSystemDirectoryHandle);
}

/** Collects the Files of a drop (directories included) and finds the store among them. */
export declare function filesFromDataTransfer(dataTransfer: DataTransfer): Promise<BlobSource>;
/** Whether the build on this thread decodes on a wasm thread pool (false; see `Store.threaded`). */
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

/** Starts the worker (and its wasm build, threaded in a cross-origin-isolated page) before the
 *  first store is opened, and keeps it for the page's life. */
export declare function warmWorker(options?: { threads?: boolean }): Promise<{ threaded: boolean }>;
