// Streams side by side: the main store plus stores of the same length (labels, captions, ...)
// whose record i is shown with record i of the main store, in the grid and in the detail view.
import { $, el, fmtInt, fmtShape } from './util.js';
import { openStore } from './open.js';

/** @typedef {import('./open.js').Opened} Opened */
/** @typedef {import('./open.js').Openable} Openable */
/** @typedef {import('./open.js').PickerWindow} PickerWindow */

/**
 * A store whose length differs from the main store's is refused with this error.
 * @param {Opened} main
 * @param {Opened} other
 */
export function lengthError(main, other) {
  /** @type {Error & {code?: string}} */
  const e = new Error(`${other.label} has ${fmtInt(other.store.length)} records but ${main.label} has ${fmtInt(main.store.length)}: ` +
    'streams shown side by side must have the same length (record i of each belongs together).');
  e.code = 'VIEWER_LENGTH';
  return e;
}

/**
 * Opens `what` as an extra stream of `main`; rejects (and closes it) when the lengths differ.
 * @param {Opened} main
 * @param {Openable} what
 */
export async function openStream(main, what) {
  const entry = await openStore(what);
  if (entry.store.length !== main.store.length) {
    const err = lengthError(main, entry);
    await entry.store.close();
    throw err;
  }
  return entry;
}

const describe = (/** @type {Opened} */ s) => {
  const sc = s.store.schema;
  if (!sc) return `${fmtInt(s.store.length)} byte records`;
  return `${fmtInt(s.store.length)} × ${sc.kind === 'ragged' ? 'ragged ' : ''}${sc.dtype} ${sc.kind === 'ragged' ? '' : fmtShape(sc.itemShape)}`.trim();
};

/** The streams bar: a chip per stream (extras can be removed) and the add controls. */
export class StreamsBar {
  /**
   * @param {HTMLElement} root  holds #stream-list, #stream-form, #stream-url, #stream-dir and #stream-input
   * @param {{onAdd: (entry: Opened) => void, onRemove: (k: number) => void, onError: (e: any, context: string) => void}} hooks
   */
  constructor(root, { onAdd, onRemove, onError }) {
    this.root = root;
    this.list = $('#stream-list', HTMLElement, root);
    this.hooks = { onAdd, onRemove, onError };
    /** @type {Opened | null} */
    this.main = null;
    const form = $('#stream-form', HTMLFormElement, root);
    const url = $('#stream-url', HTMLInputElement, root);
    const input = $('#stream-input', HTMLInputElement, root);
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      if (url.value.trim()) this.add(url.value.trim()).then((ok) => { if (ok) url.value = ''; });
    });
    $('#stream-dir', HTMLElement, root).addEventListener('click', async () => {
      const w = /** @type {PickerWindow} */ (window);
      if (typeof w.showDirectoryPicker !== 'function') return input.click();
      try {
        const handle = await w.showDirectoryPicker({ id: 'loaderx-stream', mode: 'read' });
        await this.add(handle);
      } catch (e) {
        if (e?.name !== 'AbortError') onError(e, 'Adding a stream');
      }
    });
    input.addEventListener('change', () => {
      if (input.files?.length) this.add(input.files); // (never null for a file input)
      input.value = '';
    });
  }

  /**
   * Opens and adds a stream; resolves to whether it was added.
   * @param {Openable} what
   */
  async add(what) {
    if (!this.main) return false;
    this.root.classList.add('busy');
    try {
      this.hooks.onAdd(await openStream(this.main, what));
      return true;
    } catch (e) {
      this.hooks.onError(e, 'Adding a stream');
      return false;
    } finally {
      this.root.classList.remove('busy');
    }
  }

  /**
   * @param {Opened} main
   * @param {Opened[]} extras
   */
  render(main, extras) {
    this.main = main;
    const chip = (/** @type {Opened} */ s, /** @type {number} */ k) => el('li', { class: `chip${k < 0 ? ' main' : ''}`, dataset: { stream: String(k + 1) } },
      el('span', { class: 'dot', style: { background: `var(--s${(k + 1) % 4})` } }),
      el('strong', {}, s.label),
      el('span', { class: 'dim' }, describe(s)),
      k >= 0 ? el('button', { class: 'chip-x', type: 'button', title: 'Remove this stream', 'aria-label': `remove ${s.label}`, onclick: () => this.hooks.onRemove(k) }, '✕') : null);
    this.list.replaceChildren(chip(main, -1), ...extras.map((s, k) => chip(s, k)));
  }
}
