// The step inspector: paste a run's receipt (DataLoader.receipt()) or loader state
// (state_dict()), pick a step and a rank, and the grid shows the records that step fed that rank,
// computed by the core sampler compiled to wasm (stepRecords, the rule of Python's
// loaderx.receipt.indices). A run through exclusion masks takes their files (each matched to its
// source by the store identity it names). A packed run's rows come from the open store's
// document lengths (read once per store; a packed mix needs every source's, so Node's
// stepRecords with `lengths` serves it). The address
// bar keeps the run (?run=, base64url JSON) and the place (#step=k&rank=r), so a link to a loss
// spike's batch reproduces it.
import { Mask, stepRecords } from '../src/browser.js';
import { el, fmtInt } from './util.js';

/** base64url of UTF-8 text, and back. */
export const toB64 = (/** @type {string} */ text) => btoa(String.fromCharCode(...new TextEncoder().encode(text))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
export const fromB64 = (/** @type {string} */ b64) => new TextDecoder().decode(Uint8Array.from(atob(b64.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0)));

/** @typedef {{step: number, rank: number, shardCount: number, indices: number[]}} Shown */

/** `sha256:<hex>` of bytes. @param {Uint8Array<ArrayBuffer>} bytes */
async function sha256(bytes) {
  const hash = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return `sha256:${Array.from(hash, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

export class Inspector {
  /**
   * @param {HTMLElement} root
   * @param {{onShow: (shown: Shown) => void, onError: (e: any, context: string) => void, lengths: () => Promise<number[]>}} hooks
   */
  constructor(root, hooks) {
    this.hooks = hooks;
    /** The pasted run (parsed JSON) and its text. @type {any} */
    this.run = null;
    this.text = '';
    /** The mask files given, each with its `sha256:` (checked against the run's). @type {{mask: Mask, digest: string}[]} */
    this.masks = [];
    this.input = el('textarea', { id: 'run-input', rows: 3, spellcheck: false, placeholder: 'Paste the JSON of DataLoader.receipt() or state_dict()' });
    this.step = el('input', { id: 'run-step', type: 'number', min: '0', value: '0', 'aria-label': 'Step' });
    this.rank = el('input', { id: 'run-rank', type: 'number', min: '0', value: '0', 'aria-label': 'Rank' });
    this.maskInput = el('input', { id: 'run-mask', type: 'file', accept: '.lxmask', multiple: true, 'aria-label': 'Exclusion masks of the run' });
    this.note = el('div', { class: 'dim', id: 'run-note', dataset: { k: 'inspect' } }, 'the records a step fed each rank, by the same sampler as the training run');
    const show = el('button', { class: 'btn small', type: 'button', id: 'run-show' }, 'Show step');
    show.onclick = () => this.#fromForm();
    this.maskInput.addEventListener('change', async () => {
      try {
        const files = Array.from(this.maskInput.files ?? []);
        const read = await Promise.all(files.map(async (f) => {
          const bytes = new Uint8Array(await f.arrayBuffer());
          return { mask: new Mask(bytes), digest: await sha256(bytes) };
        }));
        for (const m of this.masks) m.mask.free();
        this.masks = read;
        this.maskInput.dataset.loaded = String(read.length);
      } catch (e) {
        this.hooks.onError(e, 'Reading the mask');
      }
    });
    root.replaceChildren(el('h3', {}, 'Step inspector'), this.input,
      el('div', { class: 'inspect-row' }, el('label', {}, 'step ', this.step), el('label', {}, 'rank ', this.rank), el('label', {}, 'mask ', this.maskInput), show), this.note);
  }

  #fromForm() {
    const text = this.input.value.trim();
    try {
      const run = JSON.parse(text);
      this.text = text;
      this.run = run;
      this.show(Number(this.step.value), Number(this.rank.value));
    } catch (e) {
      this.hooks.onError(e instanceof SyntaxError ? Object.assign(new Error(`not JSON: ${e.message}`), { code: 'VIEWER_INPUT' }) : e, 'Reading the run');
    }
  }

  /**
   * Restores a run from the address bar (its JSON text) and shows `step`, `rank`.
   * @param {string} text @param {number} step @param {number} rank
   */
  restore(text, step, rank) {
    this.input.value = text;
    this.step.value = String(step);
    this.rank.value = String(rank);
    this.#fromForm();
  }

  /**
   * The masks for the run's sources: each recorded mask matched by its store identity to a
   * file given (null where the run had none, or no file matches: stepRecords says which).
   */
  #masksFor(/** @type {any} */ exclude) {
    const given = this.masks;
    if (exclude == null) return {};
    const recorded = Array.isArray(exclude) ? exclude : [exclude];
    const pick = recorded.map((want) => (want == null ? null : given.find((m) => m.digest === want.digest) ?? given.find((m) => m.mask.identity === want.identity) ?? null));
    return { masks: pick.map((m) => m?.mask ?? null), digests: pick.map((m) => m?.digest ?? null) };
  }

  /** Shows `step` for `rank` (clamped to the ranks of that step). @param {number} step @param {number} rank */
  async show(step, rank) {
    if (!this.run) return;
    const run = this.run;
    try {
      const c = run.config ?? {};
      const packed = c.packed != null;
      if (packed && Array.isArray(c.mix)) {
        throw Object.assign(new Error('this packed run mixes several sources: the viewer has one open; use stepRecords in Node with each source\'s lengths'), { code: 'VIEWER_INPUT' });
      }
      const lengths = packed ? await this.hooks.lengths() : null;
      if (this.run !== run) return;
      const got = stepRecords(run, step, { ...this.#masksFor(c.exclude), lengths });
      const r = Math.max(0, Math.min(got.shardCount - 1, Number.isInteger(rank) ? rank : 0));
      this.step.value = String(step);
      this.rank.value = String(r);
      this.rank.max = String(got.shardCount - 1);
      const indices = got.ranks[r];
      this.note.dataset.v = JSON.stringify({ step, rank: r, shardCount: got.shardCount, indices, rows: got.rows?.[r] ?? null });
      const what = got.rows ? `${fmtInt(got.rows[r].length)} packed rows of ${fmtInt(indices.length)} records` : `${fmtInt(indices.length)} records`;
      const total = got.rows ? `${fmtInt(got.global.length)} records in the global batch` : `global batch ${fmtInt(got.global.length)}`;
      this.note.replaceChildren(`step ${fmtInt(step)}, rank ${r} of ${got.shardCount}: ${what} (${total})`);
      this.hooks.onShow({ step, rank: r, shardCount: got.shardCount, indices });
    } catch (e) {
      this.hooks.onError(e, `Finding the records of step ${step}`);
    }
  }
}

/** The inspector's place in the address bar's hash (`#step=k&rank=r`), or null. */
export function placeOf(/** @type {string} */ hash) {
  const q = new URLSearchParams(hash.replace(/^#/, ''));
  const step = q.get('step');
  const rank = q.get('rank');
  if (step == null || !/^\d+$/.test(step)) return null;
  return { step: Number(step), rank: rank != null && /^\d+$/.test(rank) ? Number(rank) : 0 };
}

