//! The console token. A server started with a token answers only calls that carry it as
//! `authorization: Bearer <token>`; both programs take it from `--token` or, by default,
//! from [`TOKEN_ENV`] (clap's `env`), and treat an empty one as none.

/// The environment variable both programs read the token from.
pub const TOKEN_ENV: &str = "VOLT_CONSOLE_TOKEN";

/// The token as given, with an empty one meaning none.
pub fn token_from(given: Option<String>) -> Option<String> {
    given.filter(|t| !t.is_empty())
}

/// A request carrying the token, if any. A token that is not a valid header value is
/// left off (the server then says the call is unauthenticated, which names the cause).
pub fn request<T>(msg: T, token: Option<&str>) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    if let Some(t) = token {
        if let Ok(v) = format!("Bearer {t}").parse() {
            req.metadata_mut().insert("authorization", v);
        }
    }
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_travels_as_a_bearer_header() {
        let r = request((), Some("s3cret"));
        assert_eq!(r.metadata().get("authorization").unwrap(), "Bearer s3cret");
        assert!(request((), None).metadata().get("authorization").is_none());
        assert!(request((), Some("bad\nvalue")).metadata().get("authorization").is_none());
    }

    #[test]
    fn an_empty_token_is_none() {
        assert_eq!(token_from(Some(String::new())), None);
        assert_eq!(token_from(None), None);
        assert_eq!(token_from(Some("t".into())), Some("t".into()));
    }
}
