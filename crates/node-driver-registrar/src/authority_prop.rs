//! The rewriter under generated input: the same output however the bytes arrive, every request's headers intact
//! but its `:authority`, and what it holds bounded whatever a client sends.

use proptest::prelude::*;

use super::*;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// One thing a client sends after the preface.
#[derive(Clone, Debug)]
enum Sent {
    /// A frame the rewriter passes through (any type but HEADERS and CONTINUATION).
    Other { kind: u8, flags: u8, stream: u32, payload: Vec<u8> },
    /// A request's header block, cut into a HEADERS frame and CONTINUATION frames at `cuts`.
    Request {
        stream: u32,
        end_stream: bool,
        priority: Option<[u8; 5]>,
        padding: Option<u8>,
        headers: Vec<(Vec<u8>, Vec<u8>)>,
        cuts: Vec<prop::sample::Index>,
    },
}

fn header() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    let name = prop_oneof![
        Just(b":authority".to_vec()),
        Just(b":path".to_vec()),
        Just(b"content-type".to_vec()),
        "[a-z][a-z0-9-]{0,15}".prop_map(String::into_bytes),
    ];
    let value = prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 0..40),
        1 => prop::collection::vec(any::<u8>(), 0..1500),
    ];
    (name, value)
}

fn sent() -> impl Strategy<Value = Sent> {
    let passed_kind =
        prop_oneof![Just(0x0u8), Just(0x2), Just(0x3), Just(0x4), Just(0x6), Just(0x7), Just(0x8), 0xau8..];
    let other = (passed_kind, any::<u8>(), any::<u32>(), prop::collection::vec(any::<u8>(), 0..200))
        .prop_map(|(kind, flags, stream, payload)| Sent::Other { kind, flags, stream, payload });
    let request = (
        (0u32..1000).prop_map(|n| 2 * n + 1),
        any::<bool>(),
        any::<Option<[u8; 5]>>(),
        any::<Option<u8>>(),
        prop::collection::vec(header(), 0..8),
        prop::collection::vec(any::<prop::sample::Index>(), 0..4),
    )
        .prop_map(|(stream, end_stream, priority, padding, headers, cuts)| Sent::Request {
            stream,
            end_stream,
            priority,
            padding,
            headers,
            cuts,
        });
    prop_oneof![other, request]
}

/// The client's bytes for `items`, header blocks encoded against one table as a client's are; also the header
/// lists and passed-through frames in the order the server must see them.
fn client_bytes(items: &[Sent]) -> (Vec<u8>, Vec<Seen>) {
    let mut encoder = loona_hpack::Encoder::new();
    let mut bytes = PREFACE.to_vec();
    let mut expected = Vec::new();
    for item in items {
        match item {
            Sent::Other { kind, flags, stream, payload } => {
                frame(*kind, *flags, *stream, payload, &mut bytes);
                expected.push(Seen::Frame(*kind, *flags, *stream, payload.clone()));
            }
            Sent::Request { stream, end_stream, priority, padding, headers, cuts } => {
                let block = encoder.encode(headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
                let mut at: Vec<usize> = cuts.iter().map(|c| c.index(block.len() + 1)).collect();
                at.extend([0, block.len()]);
                at.sort_unstable();
                at.dedup();
                let pieces: Vec<&[u8]> = if at.len() < 2 {
                    vec![&block[..]] // an empty block
                } else {
                    at.windows(2).map(|w| &block[w[0]..w[1]]).collect()
                };
                let mut first = Vec::new();
                let mut flags = if *end_stream { END_STREAM } else { 0 };
                if let Some(pad) = padding {
                    flags |= PADDED;
                    first.push(*pad);
                }
                if let Some(fields) = priority {
                    flags |= PRIORITY;
                    first.extend_from_slice(fields);
                }
                first.extend_from_slice(pieces[0]);
                first.extend(std::iter::repeat_n(0, usize::from(padding.unwrap_or(0))));
                let last = pieces.len() - 1;
                frame(HEADERS, flags | if last == 0 { END_HEADERS } else { 0 }, *stream, &first, &mut bytes);
                for (i, piece) in pieces.iter().enumerate().skip(1) {
                    frame(CONTINUATION, if i == last { END_HEADERS } else { 0 }, *stream, piece, &mut bytes);
                }
                let local = headers
                    .iter()
                    .map(|(n, v)| (n.clone(), if n == b":authority" { AUTHORITY.to_vec() } else { v.clone() }))
                    .collect();
                expected.push(Seen::Request {
                    stream: *stream,
                    end_stream: *end_stream,
                    priority: *priority,
                    headers: local,
                });
            }
        }
    }
    (bytes, expected)
}

/// What the server reads: a passed frame, or a whole header block decoded.
#[derive(Clone, Debug, PartialEq)]
enum Seen {
    Frame(u8, u8, u32, Vec<u8>),
    Request { stream: u32, end_stream: bool, priority: Option<[u8; 5]>, headers: Vec<(Vec<u8>, Vec<u8>)> },
}

/// Decodes the rewritten bytes as the server would, checking that each frame is one it accepts.
fn server_view(rewritten: &[u8]) -> Vec<Seen> {
    assert_eq!(&rewritten[..PREFACE.len()], PREFACE, "the preface passes unchanged");
    let mut decoder = loona_hpack::Decoder::new();
    let mut bytes = &rewritten[PREFACE.len()..];
    let mut seen = Vec::new();
    // (stream, END_STREAM, priority fields, the fragments so far)
    type Block = (u32, bool, Option<[u8; 5]>, Vec<u8>);
    let mut open: Option<Block> = None;
    while !bytes.is_empty() {
        let length = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        assert!(length <= MAX_FRAME, "a frame of {length} bytes");
        let (kind, flags) = (bytes[3], bytes[4]);
        let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
        let payload = bytes[9..9 + length].to_vec();
        bytes = &bytes[9 + length..];
        let block = match (kind, open.take()) {
            (HEADERS, None) => {
                assert_eq!(flags & PADDED, 0, "padding is not written again");
                let (priority, fragment) = if flags & PRIORITY != 0 {
                    (Some(<[u8; 5]>::try_from(&payload[..5]).unwrap()), payload[5..].to_vec())
                } else {
                    (None, payload)
                };
                (stream, flags & END_STREAM != 0, priority, fragment)
            }
            (CONTINUATION, Some(mut block)) => {
                assert_eq!(block.0, stream);
                block.3.extend_from_slice(&payload);
                block
            }
            (_, Some(_)) | (CONTINUATION, None) => panic!("frame {kind} inside or outside a header block"),
            _ => {
                seen.push(Seen::Frame(kind, flags, stream, payload));
                continue;
            }
        };
        if flags & END_HEADERS == 0 {
            open = Some(block);
        } else {
            let (stream, end_stream, priority, fragment) = block;
            let headers = decoder.decode(&fragment).expect("the server decodes every rewritten block");
            seen.push(Seen::Request { stream, end_stream, priority, headers });
        }
    }
    assert!(open.is_none(), "no header block is left open");
    seen
}

/// Feeds `bytes` in pieces whose sizes cycle through `sizes`; the first error ends it.
fn feed_in_pieces(rewriter: &mut Rewriter, bytes: &[u8], sizes: &[usize]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = bytes;
    for size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (piece, after) = rest.split_at(rest.len().min(*size));
        out.extend(rewriter.feed(piece)?);
        rest = after;
    }
    Ok(out)
}

/// A frame-shaped stream that may break every rule: any type, flags, stream and payload, sometimes a length
/// field that promises more than follows.
fn hostile_frame() -> impl Strategy<Value = Vec<u8>> {
    let kind = prop_oneof![3 => Just(HEADERS), 3 => Just(CONTINUATION), 1 => any::<u8>()];
    let length = prop_oneof![8 => Just(None), 1 => (0u32..1 << 24).prop_map(Some)];
    (kind, any::<u8>(), 0u32..4, prop::collection::vec(any::<u8>(), 0..300), length).prop_map(
        |(kind, flags, stream, payload, length)| {
            let mut bytes = Vec::new();
            frame(kind, flags, stream, &payload, &mut bytes);
            if let Some(length) = length {
                bytes[..3].copy_from_slice(&length.to_be_bytes()[1..]);
            }
            bytes
        },
    )
}

proptest! {
    #[test]
    fn the_server_sees_the_same_requests_with_a_local_authority_however_the_bytes_arrive(
        items in prop::collection::vec(sent(), 0..12),
        sizes in prop::collection::vec(1usize..400, 1..8),
    ) {
        let (bytes, expected) = client_bytes(&items);
        let whole = Rewriter::default().feed(&bytes).unwrap();
        let pieces = feed_in_pieces(&mut Rewriter::default(), &bytes, &sizes).unwrap();
        prop_assert_eq!(&pieces, &whole, "in pieces of {:?}", sizes);
        prop_assert_eq!(server_view(&whole), expected);
    }

    #[test]
    fn whatever_a_client_sends_the_rewriter_holds_at_most_one_frame_and_one_bounded_block(
        frames in prop::collection::vec(hostile_frame(), 0..16),
        sizes in prop::collection::vec(1usize..9000, 1..8),
    ) {
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frames.concat());
        let mut rewriter = Rewriter::default();
        let mut rest = &bytes[..];
        let mut failed = false;
        for size in sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (piece, after) = rest.split_at(rest.len().min(*size));
            rest = after;
            match rewriter.feed(piece) {
                Ok(_) => prop_assert!(!failed, "no input is read after an error"),
                Err(_) => failed = true,
            }
            prop_assert!(rewriter.input.len() < FRAME_HEADER_LEN + MAX_FRAME, "{} bytes held", rewriter.input.len());
            let open = rewriter.open.as_ref().map_or(0, |open| open.fragment.len());
            prop_assert!(open <= MAX_HEADER_LIST, "a block of {open} bytes held");
        }
    }
}

/// A 4,000-byte field added to the dynamic table, then `references` one-byte references to it.
fn table_bomb(references: usize) -> Vec<u8> {
    let mut block = vec![0x40, 1, b'x'];
    loona_hpack::encoder::encode_integer_into(4000, 7, 0, &mut block).unwrap();
    block.extend(std::iter::repeat_n(b'v', 4000));
    block.extend(std::iter::repeat_n(0x80 | 62, references));
    block
}

#[test]
fn input_beyond_the_bounds_the_server_advertises_closes_the_connection() {
    let too_big = |length: usize| {
        let mut bytes = Vec::new();
        frame(0x0, 0, 1, &[], &mut bytes);
        bytes[..3].copy_from_slice(&(length as u32).to_be_bytes()[1..]);
        bytes
    };
    let headers = |block: &[u8]| {
        let mut bytes = Vec::new();
        frame(HEADERS, END_HEADERS, 1, block, &mut bytes);
        bytes
    };
    let continued = |frames: usize| {
        let mut bytes = Vec::new();
        frame(HEADERS, 0, 1, &[], &mut bytes);
        for _ in 0..frames {
            frame(CONTINUATION, 0, 1, &[0x82; MAX_FRAME], &mut bytes);
        }
        bytes
    };
    // (case, bytes after the preface, refused)
    let table: Vec<(&str, Vec<u8>, bool)> = vec![
        (
            "a frame header announcing one byte above the maximum frame size, no payload sent",
            too_big(MAX_FRAME + 1),
            true,
        ),
        ("a frame header announcing 16 MiB", too_big((1 << 24) - 1), true),
        (
            "a DATA frame of exactly the maximum frame size",
            {
                let mut bytes = Vec::new();
                frame(0x0, 0, 1, &[0; MAX_FRAME], &mut bytes);
                bytes
            },
            false,
        ),
        ("a CONTINUATION chain reaching the maximum header list size, still open", continued(1), false),
        ("a CONTINUATION chain past the maximum header list size", continued(2), true),
        ("a table size update above the advertised header table size", headers(&[0x3f, 0xe2, 0x1f, 0x82]), true),
        ("a table size update to the advertised size", headers(&[0x3f, 0xe1, 0x1f, 0x82]), false),
        (
            "a 4,000-byte field and three references to it stay within the header list size",
            headers(&table_bomb(3)),
            false,
        ),
        ("a 4,000-byte field and four references to it decode past it", headers(&table_bomb(4)), true),
    ];
    for (case, frames, refused) in table {
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frames);
        let mut rewriter = Rewriter::default();
        let fed = rewriter.feed(&bytes);
        assert_eq!(fed.is_err(), refused, "{case}: {:?}", fed.as_ref().err());
        if refused {
            assert!(rewriter.input.is_empty() && rewriter.open.is_none(), "{case}: nothing is kept");
            let mut ping = Vec::new();
            frame(0x6, 0, 0, &[0; 8], &mut ping);
            assert!(rewriter.feed(&ping).is_err(), "{case}: nothing more is read");
        }
    }
}
