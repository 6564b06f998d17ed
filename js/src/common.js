// What both entry points export beside Store, Sampler, version and threaded.
export { LoaderxError, loaderxError } from './errors.js';
export { HttpSource } from './sources/http.js';
export { MemorySource } from './sources/memory.js';
export { BlobSource } from './sources/blob.js';
export { dtypeInfo } from './dtype.js';
export { redactUrl } from './redact.js';
