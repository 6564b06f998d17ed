// The step inspector: paste a run's receipt (DataLoader.receipt()) or loader state
// (state_dict()), pick a step and a rank, and the grid shows the records that step fed that rank,
// computed by the core sampler compiled to wasm (stepRecords, the rule of Python's
// loaderx.receipt.indices). A run through an exclusion mask takes its mask file. The address
// bar keeps the run (?run=, base64url JSON) and the place (#step=k&rank=r), so a link to a loss
// spike's batch reproduces it.
import { Mask, stepRecords } from '../src/browser.js';
import { el, fmtInt } from './util.js';

/** base64url of UTF-8 text, and back. */
export const toB64 = (/** @type {string} */ text) => btoa(String.fromCharCode(...new TextEncoder().encode(text))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
export const fromB64 = (/** @type {string} */ b64) => new TextDecoder().decode(Uint8Array.from(atob(b64.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0)));

/** @typedef {{step: number, rank: number, shardCount: number, indices: number[]}} Shown */

export class Inspector {
  /**
   * @param {HTMLElement} root
   * @param {{onShow: (shown: Shown) => void, onError: (e: any, context: string) => void}} hooks
   */
  constructor(root, hooks) {
    this.hooks = hooks;
    /** The pasted run (parsed JSON) and its text. @type {any} */
    this.run = null;
    this.text = '';
    /** @type {Mask | null} */
    this.mask = null;
    /** `sha256:` of the mask file, checked against the run's. @type {string | null} */
    this.maskDigest = null;
    this.input = el('textarea', { id: 'run-input', rows: 3, spellcheck: false, placeholder: 'Paste the JSON of DataLoader.receipt() or state_dict()' });
    this.step = el('input', { id: 'run-step', type: 'number', min: '0', value: '0', 'aria-label': 'Step' });
    this.rank = el('input', { id: 'run-rank', type: 'number', min: '0', value: '0', 'aria-label': 'Rank' });
    this.maskInput = el('input', { id: 'run-mask', type: 'file', accept: '.lxmask', 'aria-label': 'Exclusion mask of the run' });
    this.note = el('div', { class: 'dim', id: 'run-note', dataset: { k: 'inspect' } }, 'the records a step fed each rank, by the same sampler as the training run');
    const show = el('button', { class: 'btn small', type: 'button', id: 'run-show' }, 'Show step');
    show.onclick = () => this.#fromForm();
    this.maskInput.addEventListener('change', async () => {
      const f = this.maskInput.files?.[0];
      try {
        const bytes = f ? new Uint8Array(await f.arrayBuffer()) : null;
        this.mask = bytes ? new Mask(bytes) : null;
        this.maskDigest = bytes ? `sha256:${Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)), (b) => b.toString(16).padStart(2, '0')).join('')}` : null;
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

  /** Shows `step` for `rank` (clamped to the ranks of that step). @param {number} step @param {number} rank */
  show(step, rank) {
    if (!this.run) return;
    try {
      const got = stepRecords(this.run, step, { mask: this.mask, digest: this.maskDigest });
      const r = Math.max(0, Math.min(got.shardCount - 1, Number.isInteger(rank) ? rank : 0));
      this.step.value = String(step);
      this.rank.value = String(r);
      this.rank.max = String(got.shardCount - 1);
      const indices = got.ranks[r];
      this.note.dataset.v = JSON.stringify({ step, rank: r, shardCount: got.shardCount, indices });
      this.note.replaceChildren(`step ${fmtInt(step)}, rank ${r} of ${got.shardCount}: ${fmtInt(indices.length)} records (global batch ${fmtInt(got.global.length)})`);
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

