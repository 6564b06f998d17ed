// What the package shows of a URL never carries its secrets: userinfo becomes `***@` and every
// query value `***`, the rest of the text (scheme, host, path, parameter names, fragment, the
// words around it) is kept as it was.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { redactUrl } from '../src/redact.js';

test('userinfo and query values are replaced, names and path kept', () => {
  assert.equal(redactUrl('http://user:pa55word@host/x?sig=abc'), 'http://***@host/x?sig=***');
  assert.equal(redactUrl('https://token@h.example:8443/a/b/'), 'https://***@h.example:8443/a/b/');
  assert.equal(
    redactUrl('https://b.s3.amazonaws.com/s/meta.zr?X-Amz-Credential=AK%2F1&X-Amz-Signature=deadbeef'),
    'https://b.s3.amazonaws.com/s/meta.zr?X-Amz-Credential=***&X-Amz-Signature=***',
  );
  assert.equal(redactUrl('s3://key:secret@bucket/prefix?versionId=7'), 's3://***@bucket/prefix?versionId=***');
  assert.equal(redactUrl('gs://bucket/p'), 'gs://bucket/p');
  assert.equal(redactUrl('az://acct:k3y@container/p'), 'az://***@container/p');
});

test('a URL with nothing secret is unchanged', () => {
  for (const url of ['http://127.0.0.1:8080/store/', 'https://host/a%20b/c#frag', 'http://host', 'http://host/?']) {
    assert.equal(redactUrl(url), url);
  }
});

test('bare query keys, empty values, fragments and an @ in the path', () => {
  assert.equal(redactUrl('http://h/x?token'), 'http://h/x?token=***');
  assert.equal(redactUrl('http://h/x?a=&b=2#part?c=3'), 'http://h/x?a=***&b=***#part?c=3');
  assert.equal(redactUrl('http://h/users/@me?k=v'), 'http://h/users/@me?k=***');
  assert.equal(redactUrl('http://u@h?k=v'), 'http://***@h?k=***');
  assert.equal(redactUrl('http://a@b:c@h/x'), 'http://***@h/x');
});

test('URLs inside running text are found and the text around them kept', () => {
  const text = 'cannot read "http://user:pw@h/s/meta.zr?sig=SECRET": connection refused; retry http://h/t?x=1.';
  assert.equal(
    redactUrl(text),
    'cannot read "http://***@h/s/meta.zr?sig=***": connection refused; retry http://h/t?x=***.',
  );
  assert.equal(redactUrl('GET http://h/a?s=1: timed out'), 'GET http://h/a?s=***: timed out');
  assert.equal(redactUrl('two: http://u:p@a/x (and HTTPS://v:q@b/y?z=9)'), 'two: http://***@a/x (and HTTPS://***@b/y?z=***)');
  assert.equal(redactUrl('/local/path?x=1 and ftp://u:p@h/ stay'), '/local/path?x=1 and ftp://u:p@h/ stay');
});

test('non-strings are stringified and nothing throws', () => {
  assert.equal(redactUrl(new URL('http://u:p@h/x?q=1')), 'http://***@h/x?q=***');
  assert.equal(redactUrl(42), '42');
  const hostile = { toString() { throw new Error('no'); } };
  assert.equal(redactUrl(hostile), '');
});
