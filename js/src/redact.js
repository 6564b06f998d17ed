// Hides the secrets a URL can carry before it is shown: userinfo (`user:password@`) and the values
// of the query string (a presigned URL's signature). The requests keep the full URL; only what
// the package prints (error messages, labels, inspect output, QA reports) goes through here.
// The spelling matches the other front ends: `http://***@host/x?sig=***&expires=***`.

const PLACEHOLDER = '***';

// A URL in running text: one of the schemes the package reads, up to whitespace or a quote.
const URL_IN_TEXT = /\b(?:https?|s3|gs|az|abfss?):\/\/[^\s"'`<>]+/gi;
// Punctuation that ends a sentence rather than the URL ("failed for http://h/x?a=b: refused").
const TRAILING = /[.,;:!?)\]}]+$/;

/** `text` with every http(s)/s3/gs/az URL in it redacted: userinfo becomes `***@` and each query
 *  value becomes `***` (parameter names kept). Everything else is left as it is. Never throws. */
export function redactUrl(text) {
  let s;
  try {
    s = String(text);
  } catch {
    return '';
  }
  return s.replace(URL_IN_TEXT, (match) => {
    const tail = TRAILING.exec(match)?.[0] ?? '';
    return redactOne(match.slice(0, match.length - tail.length)) + tail;
  });
}

/** One URL (`scheme://authority/path?query#fragment`) redacted. */
function redactOne(url) {
  const start = url.indexOf('://') + 3;
  const hash = url.indexOf('#', start);
  const body = hash < 0 ? url : url.slice(0, hash);
  const fragment = hash < 0 ? '' : url.slice(hash);
  const q = body.indexOf('?', start);
  const beforeQuery = q < 0 ? body : body.slice(0, q);
  const query = q < 0 ? null : body.slice(q + 1);

  let authorityEnd = beforeQuery.indexOf('/', start);
  if (authorityEnd < 0) authorityEnd = beforeQuery.length;
  const authority = beforeQuery.slice(start, authorityEnd);
  const at = authority.lastIndexOf('@');
  const host = at < 0 ? authority : `${PLACEHOLDER}@${authority.slice(at + 1)}`;

  let out = url.slice(0, start) + host + beforeQuery.slice(authorityEnd);
  if (query != null) out += `?${redactQuery(query)}`;
  return out + fragment;
}

function redactQuery(query) {
  if (query === '') return '';
  return query
    .split('&')
    .map((part) => {
      if (part === '') return part;
      const eq = part.indexOf('=');
      return `${eq < 0 ? part : part.slice(0, eq)}=${PLACEHOLDER}`;
    })
    .join('&');
}
