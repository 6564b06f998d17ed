//! Showing URLs without their secrets: the one rule every front end applies before a URL
//! reaches an error message, a repr, a log line or a progress bar.
//!
//! A URL can carry credentials in its userinfo (`https://user:password@host/…`) and in its
//! query string (a presigned URL's `X-Amz-Signature=…`, a SAS token). What is shown replaces
//! the userinfo with `***@` and every query value with `***`, keeping the scheme, host, path,
//! parameter names and fragment: `http://user:pw@host/x?sig=abc` is shown as
//! `http://***@host/x?sig=***`. Requests always use the URL as given; only what is shown goes
//! through here. The JavaScript package's `redactUrl` (js/src/redact.js) spells it the same.
//!
//! Invariants: [`redact`] never fails and never panics; text without a URL of one of
//! [`SCHEMES`] comes back unchanged; redacting twice gives what redacting once gave.

/// What replaces a secret.
pub const HIDDEN: &str = "***";

/// The URL schemes whose URLs are found in text and redacted (lower case; matched in any case).
pub const SCHEMES: [&str; 8] = ["http", "https", "s3", "s3a", "gs", "az", "abfs", "abfss"];

/// Characters that end a URL in running text.
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>')
}

/// Punctuation that ends a sentence rather than the URL (`failed for http://h/x: refused`).
fn trailing(c: char) -> bool {
    matches!(c, '.' | ',' | ';' | ':' | '!' | '?' | ')' | ']' | '}')
}

fn word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `text` with every URL of one of [`SCHEMES`] in it redacted: userinfo becomes `***@` and each
/// query value `***` (parameter names kept). The rest of the text is kept as it is.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let sep = from + found;
        from = sep + 3;
        // The scheme is the run of word characters right before "://".
        let start =
            text[..sep].char_indices().rev().find(|&(_, c)| !word(c)).map_or(0, |(i, c)| i + c.len_utf8());
        let scheme = &text[start..sep];
        if start < copied || !SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme)) {
            continue;
        }
        let mut end = text[from..].find(ends_url).map_or(text.len(), |i| from + i);
        if end == from {
            continue;
        }
        while let Some(c) = text[..end].chars().next_back().filter(|&c| trailing(c) && end > from) {
            end -= c.len_utf8();
        }
        out.push_str(&text[copied..start]);
        out.push_str(&redact_one(&text[start..end]));
        copied = end;
        from = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// One URL, `scheme://authority/path?query#fragment`, redacted.
fn redact_one(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let (body, fragment) = match url[start..].find('#') {
        Some(i) => url.split_at(start + i),
        None => (url, ""),
    };
    let (before, query) = match body[start..].find('?') {
        Some(i) => (&body[..start + i], Some(&body[start + i + 1..])),
        None => (body, None),
    };
    let authority_end = before[start..].find('/').map_or(before.len(), |i| start + i);
    let authority = &before[start..authority_end];
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..start]);
    match authority.rfind('@') {
        Some(at) => {
            out.push_str(HIDDEN);
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    out.push_str(&before[authority_end..]);
    if let Some(query) = query {
        out.push('?');
        for (k, part) in query.split('&').enumerate() {
            if k > 0 {
                out.push('&');
            }
            if !part.is_empty() {
                out.push_str(part.split('=').next().unwrap_or(part));
                out.push('=');
                out.push_str(HIDDEN);
            }
        }
    }
    out.push_str(fragment);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_and_query_values_are_hidden() {
        let cases = [
            ("http://user:pa55word@host/x", "http://***@host/x"),
            ("http://user:pa55word@host/x?sig=abc", "http://***@host/x?sig=***"),
            ("https://tok@h.example:8443/a/", "https://***@h.example:8443/a/"),
            (
                "https://b.s3.amazonaws.com/k/meta.zr?X-Amz-Credential=AK%2F1&X-Amz-Signature=f00d",
                "https://b.s3.amazonaws.com/k/meta.zr?X-Amz-Credential=***&X-Amz-Signature=***",
            ),
            ("S3://key:secret@bucket/p?versionId=3", "S3://***@bucket/p?versionId=***"),
            ("az://acct:k3y@container/p", "az://***@container/p"),
            ("http://h/x?flag", "http://h/x?flag=***"),
            ("http://h/x?a=&b=2#frag?c=3", "http://h/x?a=***&b=***#frag?c=3"),
            ("http://h/users/@me?k=v", "http://h/users/@me?k=***"),
            ("http://u@h?k=v", "http://***@h?k=***"),
            ("http://a@b:c@h/x", "http://***@h/x"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact(url), shown, "{url}");
            assert_eq!(redact(shown), shown, "redacting is idempotent: {shown}");
        }
    }

    #[test]
    fn text_without_secrets_is_unchanged() {
        for text in [
            "http://127.0.0.1:8080/store/",
            "https://host/a%20b/c#frag",
            "http://host",
            "http://host/?",
            "gs://bucket/prefix",
            "/data/s3:/x?y=1",
            "ftp://u:p@h/ is not a store URL",
            "xhttp://u:p@h/ is not one either",
            "",
            "no URL here: just words, ünïcode and :// alone",
        ] {
            assert_eq!(redact(text), text);
        }
    }

    #[test]
    fn urls_in_running_text_keep_the_text_around_them() {
        assert_eq!(
            redact("error sending request for url (http://user:pw@127.0.0.1:9/s/meta.zr?sig=S)"),
            "error sending request for url (http://***@127.0.0.1:9/s/meta.zr?sig=***)"
        );
        assert_eq!(
            redact("cannot read \"https://u:p@h/s?t=1\": refused; retry http://h/t?x=1."),
            "cannot read \"https://***@h/s?t=***\": refused; retry http://h/t?x=***."
        );
        assert_eq!(
            redact("a http://u:p@a/x, and é:HTTPS://v@b/y?z=9"),
            "a http://***@a/x, and é:HTTPS://***@b/y?z=***"
        );
    }
}
