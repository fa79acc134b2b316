//! The kubelet dials the registration socket as grpc-go does by default, with the socket path (percent-encoded) as
//! the HTTP/2 `:authority` (kubernetes pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go, `dial`:
//! no `WithAuthority`). The HTTP/2 server under tonic refuses an authority that is not a host and resets every
//! stream, so the kubelet could never register the driver. Every accepted connection is read through
//! [`LocalAuthority`], which sets the `:authority` of each request header block to `localhost`, what grpc-go itself
//! sends for `unix:` targets.
//!
//! A header block is HPACK-encoded against a table the client keeps in step with the server's. [`Rewriter`] decodes
//! each block with the client's table and encodes it again with literals that add nothing to the server's table,
//! so both tables stay consistent. Every other frame passes unchanged, and nothing is touched on the way back.
//!
//! What a client may make it hold is bounded by what the HTTP/2 server behind it (hyper's, under tonic) advertises
//! and would refuse anyway: a frame larger than the maximum frame size, a header block whose fragments or decoded
//! header list exceed the maximum header list size, or a table size update above the header table size closes the
//! connection with a logged error before any of it is buffered or decoded further.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;

/// The client's connection preface, which precedes the first frame.
const PREFACE_LEN: usize = 24;
const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The largest frame payload a peer must accept before it says otherwise (SETTINGS_MAX_FRAME_SIZE's initial value);
/// hyper's server keeps it (hyper src/proto/h2/server.rs, `DEFAULT_MAX_FRAME_SIZE`), so a larger frame is refused.
const MAX_FRAME: usize = 16_384;
/// The header list size hyper's server advertises (SETTINGS_MAX_HEADER_LIST_SIZE, hyper src/proto/h2/server.rs):
/// each field counts its name, its value and 32 bytes. It bounds a block's fragments as well: a sane encoder never
/// makes a block longer than the list it encodes. (Go's http2 server allows 1 MiB, grpc-go's 16 MiB; the
/// kubelet's registration calls need a few hundred bytes.)
const MAX_HEADER_LIST: usize = 16_384;
/// What HPACK counts for each field besides its name and value.
const FIELD_OVERHEAD: usize = 32;
/// SETTINGS_HEADER_TABLE_SIZE's initial value, which the server behind does not change: a client may not size its
/// table above it (RFC 7541, dynamic table size update).
const HEADER_TABLE_SIZE: usize = 4_096;
/// The authority every request gets.
pub const AUTHORITY: &[u8] = b"localhost";

/// A header block whose CONTINUATION frames are still to come.
struct OpenBlock {
    stream: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
}

/// The client-to-server bytes of one connection, with every request's `:authority` set to [`AUTHORITY`].
pub struct Rewriter {
    preface_left: usize,
    input: Vec<u8>,
    open: Option<OpenBlock>,
    decoder: loona_hpack::Decoder<'static>,
    /// Set by the first malformed or oversized input: the connection is done, and nothing more is read.
    refused: bool,
}

impl Default for Rewriter {
    fn default() -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(HEADER_TABLE_SIZE);
        Rewriter { preface_left: PREFACE_LEN, input: Vec::new(), open: None, decoder, refused: false }
    }
}

fn malformed(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl Rewriter {
    /// Takes `bytes` as they arrived and returns what the server may read now: whole frames, rewritten where they
    /// carry a header block; a frame cut short waits for the rest. After an error every call fails: the bytes
    /// that follow a broken frame have no meaning.
    pub fn feed(&mut self, bytes: &[u8]) -> io::Result<Vec<u8>> {
        if self.refused {
            return Err(malformed("the connection was already refused"));
        }
        let fed = self.feed_frames(bytes);
        if fed.is_err() {
            self.refused = true;
            self.input = Vec::new();
            self.open = None;
        }
        fed
    }

    fn feed_frames(&mut self, bytes: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut bytes = bytes;
        if self.preface_left > 0 {
            let passed = self.preface_left.min(bytes.len());
            out.extend_from_slice(&bytes[..passed]);
            self.preface_left -= passed;
            bytes = &bytes[passed..];
        }
        self.input.extend_from_slice(bytes);
        let mut at = 0;
        while self.input.len() - at >= FRAME_HEADER_LEN {
            let header = &self.input[at..at + FRAME_HEADER_LEN];
            let length = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            if length > MAX_FRAME {
                return Err(malformed(format!("a frame of {length} bytes, above the maximum frame size {MAX_FRAME}")));
            }
            if self.input.len() - at < FRAME_HEADER_LEN + length {
                break;
            }
            let (kind, flags) = (header[3], header[4]);
            let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
            let payload = self.input[at + FRAME_HEADER_LEN..at + FRAME_HEADER_LEN + length].to_vec();
            match (kind, self.open.take()) {
                (HEADERS, None) => self.open_block(stream, flags, &payload, &mut out)?,
                (CONTINUATION, Some(mut open)) if open.stream == stream => {
                    if open.fragment.len() + payload.len() > MAX_HEADER_LIST {
                        return Err(malformed(format!(
                            "a header block continued past {MAX_HEADER_LIST} bytes, the maximum header list size"
                        )));
                    }
                    open.fragment.extend_from_slice(&payload);
                    self.finish_or_wait(open, flags, &mut out)?;
                }
                (_, Some(_)) => return Err(malformed("a header block interrupted by another frame")),
                (CONTINUATION, None) => return Err(malformed("CONTINUATION without a header block")),
                _ => out.extend_from_slice(&self.input[at..at + FRAME_HEADER_LEN + length]),
            }
            at += FRAME_HEADER_LEN + length;
        }
        self.input.drain(..at);
        Ok(out)
    }

    fn open_block(&mut self, stream: u32, flags: u8, payload: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let mut body = payload;
        let mut padding = 0;
        if flags & PADDED != 0 {
            padding = usize::from(*body.first().ok_or_else(|| malformed("PADDED HEADERS without a pad length"))?);
            body = &body[1..];
        }
        let mut priority = None;
        if flags & PRIORITY != 0 {
            let fields = body.get(..5).ok_or_else(|| malformed("PRIORITY HEADERS too short"))?;
            priority = Some(<[u8; 5]>::try_from(fields).expect("five bytes"));
            body = &body[5..];
        }
        let fragment = body.get(..body.len().checked_sub(padding).ok_or_else(|| malformed("padding too long"))?);
        let fragment = fragment.expect("checked length").to_vec();
        let open = OpenBlock { stream, end_stream: flags & END_STREAM != 0, priority, fragment };
        self.finish_or_wait(open, flags, out)
    }

    fn finish_or_wait(&mut self, open: OpenBlock, flags: u8, out: &mut Vec<u8>) -> io::Result<()> {
        if flags & END_HEADERS == 0 {
            self.open = Some(open);
            return Ok(());
        }
        // Indexed fields make a short block decode into a long list: stop keeping fields past the bound.
        let (mut headers, mut list_size) = (Vec::new(), 0usize);
        self.decoder
            .decode_with_cb(&open.fragment, |name, value| {
                list_size = list_size.saturating_add(name.len() + value.len() + FIELD_OVERHEAD);
                if list_size <= MAX_HEADER_LIST {
                    headers.push((name.into_owned(), value.into_owned()));
                }
            })
            .map_err(|e| malformed(format!("header block: {e:?}")))?;
        if list_size > MAX_HEADER_LIST {
            return Err(malformed(format!(
                "a header list of {list_size} bytes, above the maximum header list size {MAX_HEADER_LIST}"
            )));
        }
        let block = encode_with_local_authority(&headers);
        write_header_frames(open.stream, open.end_stream, open.priority, &block, out);
        Ok(())
    }
}

/// The headers as literals that are never indexed, `:authority` set to [`AUTHORITY`].
pub fn encode_with_local_authority(headers: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in headers {
        let value = if name.as_slice() == b":authority" { AUTHORITY } else { value.as_slice() };
        // A literal with a new name, not indexed: a zero byte, then the name and the value as plain strings.
        block.push(0);
        for string in [name.as_slice(), value] {
            loona_hpack::encoder::encode_integer_into(string.len(), 7, 0, &mut block).expect("writing to a Vec");
            block.extend_from_slice(string);
        }
    }
    block
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8], out: &mut Vec<u8>) {
    let length = payload.len();
    out.extend_from_slice(&[(length >> 16) as u8, (length >> 8) as u8, length as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// A HEADERS frame, and CONTINUATION frames when the block does not fit in one.
fn write_header_frames(stream: u32, end_stream: bool, priority: Option<[u8; 5]>, block: &[u8], out: &mut Vec<u8>) {
    let mut first = Vec::new();
    let mut flags = if end_stream { END_STREAM } else { 0 };
    if let Some(priority) = priority {
        flags |= PRIORITY;
        first.extend_from_slice(&priority);
    }
    let room = MAX_FRAME - first.len();
    let (head, mut rest) = block.split_at(block.len().min(room));
    first.extend_from_slice(head);
    frame(HEADERS, flags | if rest.is_empty() { END_HEADERS } else { 0 }, stream, &first, out);
    while !rest.is_empty() {
        let (chunk, after) = rest.split_at(rest.len().min(MAX_FRAME));
        frame(CONTINUATION, if after.is_empty() { END_HEADERS } else { 0 }, stream, chunk, out);
        rest = after;
    }
}

/// A connection whose reads pass through a [`Rewriter`]; writes go straight through.
pub struct LocalAuthority {
    inner: UnixStream,
    rewriter: Rewriter,
    ready: Vec<u8>,
}

impl LocalAuthority {
    pub fn new(inner: UnixStream) -> LocalAuthority {
        LocalAuthority { inner, rewriter: Rewriter::default(), ready: Vec::new() }
    }
}

impl AsyncRead for LocalAuthority {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while this.ready.is_empty() {
            let mut chunk = [0u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                return Poll::Ready(Ok(())); // end of the stream
            }
            this.ready = this.rewriter.feed(read.filled()).inspect_err(|error| {
                tracing::warn!(%error, "closing a connection to the registration socket: its HTTP/2 input was refused");
            })?;
        }
        let n = this.ready.len().min(buf.remaining());
        buf.put_slice(&this.ready[..n]);
        this.ready.drain(..n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for LocalAuthority {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for LocalAuthority {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    fn request(authority: &[u8]) -> Vec<(&'static [u8], Vec<u8>)> {
        vec![
            (b":method", b"POST".to_vec()),
            (b":scheme", b"http".to_vec()),
            (b":path", b"/pluginregistration.Registration/GetInfo".to_vec()),
            (b":authority", authority.to_vec()),
            (b"content-type", b"application/grpc".to_vec()),
            (b"te", b"trailers".to_vec()),
        ]
    }

    /// The frames of `bytes` (after the preface): (type, flags, stream, payload).
    fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        let mut frames = Vec::new();
        while !bytes.is_empty() {
            let length = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
            let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
            frames.push((bytes[3], bytes[4], stream, bytes[9..9 + length].to_vec()));
            bytes = &bytes[9 + length..];
        }
        frames
    }

    /// A client's bytes: the preface, a SETTINGS frame, then two requests encoded against one table (the second
    /// names the authority through the table), each followed by a DATA frame.
    fn client_bytes(authority: &[u8]) -> Vec<u8> {
        let mut encoder = loona_hpack::Encoder::new();
        let mut bytes = PREFACE.to_vec();
        frame(0x4, 0, 0, &[], &mut bytes);
        for stream in [1, 3] {
            let headers = request(authority);
            let block = encoder.encode(headers.iter().map(|(n, v)| (*n, v.as_slice())));
            frame(HEADERS, END_HEADERS, stream, &block, &mut bytes);
            frame(0x0, END_STREAM, stream, &[0, 0, 0, 0, 0], &mut bytes);
        }
        bytes
    }

    /// What the server decodes from `rewritten`: each header block's headers, in order.
    fn server_view(rewritten: &[u8]) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
        assert_eq!(&rewritten[..PREFACE.len()], PREFACE, "the preface passes unchanged");
        let mut decoder = loona_hpack::Decoder::new();
        frames(&rewritten[PREFACE.len()..])
            .into_iter()
            .filter(|(kind, ..)| *kind == HEADERS)
            .map(|(_, flags, _, payload)| {
                assert_ne!(flags & END_HEADERS, 0);
                decoder.decode(&payload).unwrap()
            })
            .collect()
    }

    fn with_authority(authority: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        request(authority).into_iter().map(|(n, v)| (n.to_vec(), v)).collect()
    }

    #[test]
    fn every_request_reaches_the_server_with_a_local_authority_and_its_other_headers_intact() {
        let bytes = client_bytes(b"%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fd-reg.sock");
        // (how the bytes arrive)
        for chunk in [bytes.len(), 1, 7, 100] {
            let mut rewriter = Rewriter::default();
            let mut rewritten = Vec::new();
            for piece in bytes.chunks(chunk) {
                rewritten.extend(rewriter.feed(piece).unwrap());
            }
            let blocks = server_view(&rewritten);
            assert_eq!(blocks, vec![with_authority(AUTHORITY); 2], "in pieces of {chunk}");
            let others: Vec<_> =
                frames(&rewritten[PREFACE.len()..]).into_iter().filter(|(kind, ..)| *kind != HEADERS).collect();
            assert_eq!(others.len(), 3, "SETTINGS and two DATA frames pass unchanged");
            assert_eq!(others[1], (0x0, END_STREAM, 1, vec![0, 0, 0, 0, 0]));
        }
    }

    #[test]
    fn padded_prioritized_and_continued_blocks_come_out_whole() {
        let mut encoder = loona_hpack::Encoder::new();
        let headers = request(b"%2Frun%2Fx.sock");
        let block = encoder.encode(headers.iter().map(|(n, v)| (*n, v.as_slice())));
        let (head, tail) = block.split_at(10);
        let mut payload = vec![3]; // pad length
        payload.extend_from_slice(&[0x80, 0, 0, 1, 15]); // exclusive dependency on stream 1, weight 16
        payload.extend_from_slice(head);
        payload.extend_from_slice(&[0, 0, 0]);
        let mut bytes = PREFACE.to_vec();
        frame(HEADERS, PADDED | PRIORITY | END_STREAM, 5, &payload, &mut bytes);
        frame(CONTINUATION, END_HEADERS, 5, tail, &mut bytes);

        let rewritten = Rewriter::default().feed(&bytes).unwrap();
        let frames = frames(&rewritten[PREFACE.len()..]);
        assert_eq!(frames.len(), 1, "one HEADERS frame: {frames:?}");
        let (kind, flags, stream, payload) = &frames[0];
        assert_eq!((*kind, *flags, *stream), (HEADERS, PRIORITY | END_STREAM | END_HEADERS, 5));
        assert_eq!(&payload[..5], &[0x80, 0, 0, 1, 15], "the priority fields are kept");
        assert_eq!(loona_hpack::Decoder::new().decode(&payload[5..]).unwrap(), with_authority(AUTHORITY));
    }

    #[test]
    fn a_block_larger_than_a_frame_is_split_into_continuations() {
        let value = vec![b'v'; 40_000];
        let headers = vec![(b"x-big".to_vec(), value.clone()), (b":authority".to_vec(), b"/x".to_vec())];
        let block = encode_with_local_authority(&headers);
        let mut out = Vec::new();
        write_header_frames(7, false, None, &block, &mut out);
        let frames = frames(&out);
        let kinds: Vec<_> = frames.iter().map(|(kind, flags, ..)| (*kind, *flags)).collect();
        assert_eq!(kinds, vec![(HEADERS, 0), (CONTINUATION, 0), (CONTINUATION, END_HEADERS)]);
        assert!(frames.iter().all(|(.., payload)| payload.len() <= MAX_FRAME));
        let whole: Vec<u8> = frames.into_iter().flat_map(|(.., payload)| payload).collect();
        let decoded = loona_hpack::Decoder::new().decode(&whole).unwrap();
        assert_eq!(decoded, vec![(b"x-big".to_vec(), value), (b":authority".to_vec(), AUTHORITY.to_vec())]);
    }

    #[test]
    fn a_block_interrupted_by_another_frame_is_refused() {
        let mut bytes = PREFACE.to_vec();
        frame(HEADERS, 0, 1, &[0x82], &mut bytes);
        frame(0x0, 0, 1, &[], &mut bytes);
        assert!(Rewriter::default().feed(&bytes).is_err());
    }
}

#[cfg(test)]
#[path = "authority_prop.rs"]
mod prop_tests;
