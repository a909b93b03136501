//! CURVE keys as the locker keeps them: Z85 text files, key pairs, the
//! allowlist of client public keys, and the client side of a CURVE socket.
//!
//! A key file holds one 40-character Z85 key; blank lines and `#` comments
//! are allowed around it. `locker keygen --out PREFIX` writes `PREFIX.key`
//! (the secret key, mode 0600) and `PREFIX.pub` (the public key). This module
//! reads and writes key files and sets key options on sockets; it never binds,
//! connects or answers anything (the daemon's ZAP handler is in
//! `daemon::zap`).

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// The length of a key in bytes.
pub const KEY_BYTES: usize = 32;
/// The length of a key in Z85 text.
pub const Z85_CHARS: usize = 40;

/// The characters of the Z85 alphabet (ZeroMQ RFC 32). libzmq decodes any
/// other character silently into garbage, so keys are checked here first.
const Z85_ALPHABET: &str = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/// Why a key or a key file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("{origin}: not a CURVE key (expected {Z85_CHARS} Z85 characters, got {got:?})")]
    NotZ85 { origin: String, got: String },
    #[error("{origin}: {got:?} is no file, nor a CURVE key in Z85 ({Z85_CHARS} characters)")]
    NoKey { origin: String, got: String },
    #[error("{0}: holds no key")]
    Empty(String),
    #[error("{0}: holds more than one key")]
    Several(String),
    #[error("{0}: no *.pub file with a key in this directory")]
    EmptyDir(String),
    #[error("cannot generate a key pair: {0}")]
    Generate(zmq::Error),
    #[error("this libzmq was built without CURVE")]
    NoCurve,
}

/// A CURVE public key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(pub [u8; KEY_BYTES]);

/// A CURVE secret key. Its `Debug` does not show it, so it cannot leak into
/// a log by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey([u8; KEY_BYTES]);

/// A public key with its secret key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPair {
    pub public: PublicKey,
    pub secret: SecretKey,
}

impl PublicKey {
    /// Parses a key written in Z85; `origin` names it in errors.
    pub fn from_z85(text: &str, origin: &str) -> Result<PublicKey, KeyError> {
        decode(text, origin).map(PublicKey)
    }

    /// Reads a file holding exactly one key.
    pub fn load(path: &Path) -> Result<PublicKey, KeyError> {
        one_key(path).map(PublicKey)
    }

    /// The key in Z85, as it is written in files and logs.
    pub fn to_z85(&self) -> String {
        encode(&self.0)
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.to_z85())
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_z85())
    }
}

impl SecretKey {
    /// The raw bytes, for `set_curve_secretkey`.
    pub fn bytes(&self) -> &[u8; KEY_BYTES] {
        &self.0
    }

    /// The key in Z85, as it is written in a `.key` file.
    pub fn to_z85(&self) -> String {
        encode(&self.0)
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

impl KeyPair {
    /// A new random key pair from libzmq (which takes it from libsodium).
    pub fn generate() -> Result<KeyPair, KeyError> {
        let pair = zmq::CurveKeyPair::new().map_err(KeyError::Generate)?;
        Ok(KeyPair { public: PublicKey(pair.public_key), secret: SecretKey(pair.secret_key) })
    }

    /// The pair a secret key belongs to: the public key is derived from it.
    pub fn from_secret(secret: SecretKey) -> Result<KeyPair, KeyError> {
        let public = derive_public(&secret)?;
        Ok(KeyPair { public, secret })
    }

    /// Reads a secret key file and derives its public key. `PREFIX` and
    /// `PREFIX.key` both name the file `locker keygen --out PREFIX` wrote.
    pub fn load(prefix_or_file: &Path) -> Result<KeyPair, KeyError> {
        let with_ext = PathBuf::from(format!("{}.key", prefix_or_file.display()));
        let path = if !prefix_or_file.is_file() && with_ext.is_file() { &with_ext } else { prefix_or_file };
        KeyPair::from_secret(SecretKey(one_key(path)?))
    }

    /// Writes `PREFIX.key` (mode 0600, created so) and `PREFIX.pub`; returns
    /// both paths.
    pub fn write(&self, prefix: &Path) -> Result<(PathBuf, PathBuf), KeyError> {
        let secret = PathBuf::from(format!("{}.key", prefix.display()));
        let public = PathBuf::from(format!("{}.pub", prefix.display()));
        let text = format!("# locker CURVE secret key: keep it private\n{}\n", self.secret.to_z85());
        write_private(&secret, &text)?;
        let text = format!("# locker CURVE public key\n{}\n", self.public.to_z85());
        std::fs::write(&public, text).map_err(|source| KeyError::Write { path: shown(&public), source })?;
        Ok((secret, public))
    }
}

/// The client public keys a CURVE server accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist(HashSet<PublicKey>);

impl Allowlist {
    /// Reads a file of keys (one per line, `#` comments allowed) or a
    /// directory of `*.pub` files. An allowlist that names nobody is an
    /// error: it would lock every client out.
    pub fn load(path: &Path) -> Result<Allowlist, KeyError> {
        let keys = if path.is_dir() { keys_in_dir(path)? } else { keys_in_file(path)? };
        if keys.is_empty() {
            return Err(if path.is_dir() { KeyError::EmptyDir(shown(path)) } else { KeyError::Empty(shown(path)) });
        }
        Ok(Allowlist(keys.into_iter().map(PublicKey).collect()))
    }

    /// An allowlist of the given keys.
    pub fn of(keys: impl IntoIterator<Item = PublicKey>) -> Allowlist {
        Allowlist(keys.into_iter().collect())
    }

    /// Whether `key` may connect.
    pub fn allows(&self, key: &PublicKey) -> bool {
        self.0.contains(key)
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What a CURVE server needs: its key pair, and which clients it accepts
/// (`None`: any client that knows the server's public key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCurve {
    pub keys: KeyPair,
    pub clients: Option<Allowlist>,
    /// The clients that may reset a key's count (op `reset`); empty: none.
    pub admins: Allowlist,
}

/// What a CURVE client needs: the server's public key and its own pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCurve {
    pub server: PublicKey,
    pub keys: KeyPair,
}

impl ClientCurve {
    /// Makes `socket` a CURVE client; call before it connects.
    pub fn secure(&self, socket: &zmq::Socket) -> Result<(), zmq::Error> {
        socket.set_curve_serverkey(&self.server.0)?;
        socket.set_curve_publickey(&self.keys.public.0)?;
        socket.set_curve_secretkey(self.keys.secret.bytes())
    }
}

/// A public key given as `origin` (the flag or setting that named it, for
/// errors): a file, or the key itself in Z85. Text that is neither says
/// so, naming `origin`: a peer's key file that is missing is reported
/// against `--peer`, not against another flag.
pub fn public_key(file_or_z85: &str, origin: &str) -> Result<PublicKey, KeyError> {
    let path = Path::new(file_or_z85);
    if path.exists() {
        return PublicKey::load(path);
    }
    PublicKey::from_z85(file_or_z85, origin)
        .map_err(|_| KeyError::NoKey { origin: origin.to_owned(), got: file_or_z85.to_owned() })
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

fn encode(key: &[u8; KEY_BYTES]) -> String {
    zmq::z85_encode(key).expect("32 bytes is a multiple of 4")
}

fn decode(text: &str, origin: &str) -> Result<[u8; KEY_BYTES], KeyError> {
    let text = text.trim();
    let valid = text.len() == Z85_CHARS && text.chars().all(|c| Z85_ALPHABET.contains(c));
    let bytes = if valid { zmq::z85_decode(text).ok() } else { None };
    let shown_text: String = text.chars().take(Z85_CHARS + 8).collect();
    let not_z85 = || KeyError::NotZ85 { origin: origin.to_owned(), got: shown_text };
    bytes.and_then(|b| <[u8; KEY_BYTES]>::try_from(b).ok()).ok_or_else(not_z85)
}

/// The keys in a text: one per line, blank lines and `#` comments skipped.
/// `#` is itself a Z85 character, so a key may start with it: a line is a
/// key when its first word is a valid key, and a comment otherwise when it
/// starts with `#`. After a key, only a `#` comment may follow.
fn parse_keys(text: &str, origin: &str) -> Result<Vec<[u8; KEY_BYTES]>, KeyError> {
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let at = || format!("{origin}:{}", n + 1);
        match decode(word, &at()) {
            Ok(key) if rest.trim_start().is_empty() || rest.trim_start().starts_with('#') => keys.push(key),
            Ok(_) => return Err(KeyError::NotZ85 { origin: at(), got: line.to_owned() }),
            Err(_) if line.is_empty() || line.starts_with('#') => {}
            Err(e) => return Err(e),
        }
    }
    Ok(keys)
}

fn read(path: &Path) -> Result<String, KeyError> {
    std::fs::read_to_string(path).map_err(|source| KeyError::Read { path: shown(path), source })
}

fn keys_in_file(path: &Path) -> Result<Vec<[u8; KEY_BYTES]>, KeyError> {
    parse_keys(&read(path)?, &shown(path))
}

fn one_key(path: &Path) -> Result<[u8; KEY_BYTES], KeyError> {
    match keys_in_file(path)?.as_slice() {
        [] => Err(KeyError::Empty(shown(path))),
        [key] => Ok(*key),
        _ => Err(KeyError::Several(shown(path))),
    }
}

fn keys_in_dir(dir: &Path) -> Result<Vec<[u8; KEY_BYTES]>, KeyError> {
    let entries = std::fs::read_dir(dir).map_err(|source| KeyError::Read { path: shown(dir), source })?;
    let mut keys = Vec::new();
    for entry in entries {
        let path = entry.map_err(|source| KeyError::Read { path: shown(dir), source })?.path();
        if path.extension().is_some_and(|e| e == "pub") && path.is_file() {
            keys.extend(keys_in_file(&path)?);
        }
    }
    Ok(keys)
}

/// Creates `path` readable by its owner only, from the start, so the secret
/// is never briefly readable by others.
fn write_private(path: &Path, text: &str) -> Result<(), KeyError> {
    use std::io::Write;
    let err = |source| KeyError::Write { path: shown(path), source };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).and_then(|mut f| f.write_all(text.as_bytes())).map_err(err)
}

// libzmq's `zmq_curve_public` (4.2.1 and later), which neither `zmq` nor
// `zmq-sys` exposes; libzmq itself is linked in through `zmq-sys`.
extern "C" {
    fn zmq_curve_public(z85_public_key: *mut std::ffi::c_char, z85_secret_key: *const std::ffi::c_char) -> i32;
}

/// The public key of `secret`, computed by libzmq.
fn derive_public(secret: &SecretKey) -> Result<PublicKey, KeyError> {
    if zmq::has("curve") != Some(true) {
        return Err(KeyError::NoCurve);
    }
    let secret_z85 = std::ffi::CString::new(secret.to_z85()).expect("Z85 has no NUL");
    let mut public_z85 = [0u8; Z85_CHARS + 1];
    // SAFETY: libzmq reads the 40 characters of a NUL-terminated Z85 secret
    // key and writes 40 characters plus a NUL into a 41-byte buffer.
    let rc = unsafe { zmq_curve_public(public_z85.as_mut_ptr().cast(), secret_z85.as_ptr()) };
    if rc != 0 {
        return Err(KeyError::NoCurve);
    }
    let text = std::str::from_utf8(&public_z85[..Z85_CHARS]).expect("Z85 is ASCII");
    PublicKey::from_z85(text, "derived public key")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_libzmq_has_curve() {
        assert_eq!(zmq::has("curve"), Some(true));
    }

    #[test]
    fn the_public_key_is_derived_from_the_secret_key() {
        let pair = KeyPair::generate().unwrap();
        assert_ne!(pair.public.0, [0; KEY_BYTES]);
        assert_eq!(KeyPair::from_secret(pair.secret.clone()).unwrap(), pair);
    }

    #[test]
    fn keys_round_trip_through_z85() {
        let pair = KeyPair::generate().unwrap();
        let text = pair.public.to_z85();
        assert_eq!(text.len(), Z85_CHARS);
        assert_eq!(PublicKey::from_z85(&format!(" {text}\n"), "t").unwrap(), pair.public);
    }

    #[test]
    fn bad_keys_are_clear_errors() {
        let short = PublicKey::from_z85("abc", "flag").unwrap_err();
        assert_eq!(short.to_string(), "flag: not a CURVE key (expected 40 Z85 characters, got \"abc\")");
        let outside_alphabet = "\"".repeat(Z85_CHARS);
        assert!(matches!(PublicKey::from_z85(&outside_alphabet, "x"), Err(KeyError::NotZ85 { .. })));
    }

    #[test]
    fn key_lists_skip_comments_and_blank_lines() {
        let (a, b) = (KeyPair::generate().unwrap().public, KeyPair::generate().unwrap().public);
        let text = format!("# clients\n\n{a}  # alice\n   {b}\n#{a} (41 characters: a comment)\n");
        let keys = parse_keys(&text, "list").unwrap();
        assert_eq!(keys, [a.0, b.0]);
        // '#' is a Z85 character: a key may start with it.
        let hash_key = PublicKey::from_z85(&format!("#{}", &a.to_z85()[1..]), "t").unwrap();
        assert_eq!(parse_keys(&format!("{hash_key}\n"), "list").unwrap(), [hash_key.0]);
        assert!(parse_keys(&format!("{a} trailing words\n"), "list").is_err());
        let e = parse_keys("# ok\nnot-a-key\n", "list").unwrap_err();
        assert!(e.to_string().starts_with("list:2: not a CURVE key"), "{e}");
    }

    #[test]
    fn secret_keys_stay_out_of_debug_output() {
        let pair = KeyPair::generate().unwrap();
        let shown = format!("{pair:?}");
        assert!(!shown.contains(&pair.secret.to_z85()), "{shown}");
        assert!(shown.contains(&pair.public.to_z85()), "{shown}");
    }
}
