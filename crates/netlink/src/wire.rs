//! netlink on the wire, checked once: the bottom layer every parser of
//! this crate reads through (smoltcp's `wire` style). A [`Message`] is
//! made only from bytes whose header it has checked, an [`Attr`] only from
//! bytes whose length it has checked; after that no accessor can panic, and
//! what does not hold is a [`WireError`] naming what and where, never an
//! index out of range. The header sizes are here and only here.
use thiserror::Error;

/// struct nlmsghdr.
pub const NLMSG_HDRLEN: usize = 16;
/// struct nlattr.
pub const NLA_HDRLEN: usize = 4;
/// The nested and byte-order flags of an attribute's type.
const NLA_TYPE_MASK: u16 = 0x3fff;
const NLA_F_NESTED: u16 = 0x8000;

/// netlink's 4-byte alignment.
pub const fn align(len: usize) -> usize {
    (len + 3) & !3
}

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("netlink message of {have} bytes, shorter than its {need}-byte header")]
    ShortHeader { have: usize, need: usize },
    #[error("netlink message says {len} bytes, but {have} are there")]
    BadLength { len: usize, have: usize },
    #[error("{what}: {have} bytes after the netlink header, its header needs {need}")]
    ShortBody {
        what: &'static str,
        have: usize,
        need: usize,
    },
    #[error("attribute {kind} says {len} bytes, but {have} are there")]
    BadAttribute { kind: u16, len: usize, have: usize },
    #[error("attribute {kind}: {have} bytes, not the {need} of its type")]
    BadValue { kind: u16, have: usize, need: usize },
}

/// One netlink message, its header checked: at least NLMSG_HDRLEN bytes,
/// and its length field within the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    bytes: &'a [u8],
}

impl<'a> Message<'a> {
    /// The message at the start of `buf` (which may hold more after it).
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < NLMSG_HDRLEN {
            return Err(WireError::ShortHeader {
                have: buf.len(),
                need: NLMSG_HDRLEN,
            });
        }
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return Err(WireError::BadLength {
                len,
                have: buf.len(),
            });
        }
        Ok(Message { bytes: &buf[..len] })
    }

    /// The message's bytes, its header included.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// nlmsg_type.
    pub fn kind(&self) -> u16 {
        u16::from_ne_bytes([self.bytes[4], self.bytes[5]])
    }

    pub fn flags(&self) -> u16 {
        u16::from_ne_bytes([self.bytes[6], self.bytes[7]])
    }

    pub fn seq(&self) -> u32 {
        u32::from_ne_bytes([self.bytes[8], self.bytes[9], self.bytes[10], self.bytes[11]])
    }

    /// What follows the netlink header.
    pub fn payload(&self) -> &'a [u8] {
        &self.bytes[NLMSG_HDRLEN..]
    }

    /// The family header of `size` bytes (struct rtmsg, tcmsg, ...) that
    /// starts the payload, and the attributes after it (aligned).
    pub fn body(&self, what: &'static str, size: usize) -> Result<Body<'a>, WireError> {
        let p = self.payload();
        if p.len() < size {
            return Err(WireError::ShortBody {
                what,
                have: p.len(),
                need: size,
            });
        }
        Ok(Body {
            header: &p[..size],
            attrs: p.get(align(size)..).unwrap_or(&[]),
        })
    }

    /// For NLMSG_ERROR: the errno the kernel answered (0: an ack).
    pub fn error(&self) -> Option<i32> {
        let p = self.payload();
        (self.kind() == libc::NLMSG_ERROR as u16 && p.len() >= 4)
            .then(|| -i32::from_ne_bytes([p[0], p[1], p[2], p[3]]))
    }
}

/// A message's family header and its attributes.
#[derive(Clone, Copy, Debug)]
pub struct Body<'a> {
    pub header: &'a [u8],
    pub attrs: &'a [u8],
}

impl<'a> Body<'a> {
    /// Byte `at` of the family header (which `Message::body` sized).
    pub fn byte(&self, at: usize) -> u8 {
        self.header.get(at).copied().unwrap_or(0)
    }

    /// The 32-bit word at `at` of the family header.
    pub fn word(&self, at: usize) -> u32 {
        self.header
            .get(at..at + 4)
            .map_or(0, |w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
    }

    pub fn attributes(&self) -> Attrs<'a> {
        Attrs::new(self.attrs)
    }
}

/// The messages of a buffer as recv returned it: each checked, each at
/// the aligned end of the one before. A bad one ends the walk with its
/// error.
pub fn messages(buf: &[u8]) -> impl Iterator<Item = Result<Message<'_>, WireError>> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        match Message::new_checked(rest) {
            Ok(m) => {
                rest = rest.get(align(m.bytes.len())..).unwrap_or(&[]);
                Some(Ok(m))
            }
            Err(e) => {
                rest = &[];
                Some(Err(e))
            }
        }
    })
}

/// One attribute, its length checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr<'a> {
    /// The type, without the nested and byte-order flags.
    pub kind: u16,
    pub nested: bool,
    pub value: &'a [u8],
}

impl<'a> Attr<'a> {
    fn fixed<const N: usize>(&self) -> Result<[u8; N], WireError> {
        self.value.try_into().map_err(|_| WireError::BadValue {
            kind: self.kind,
            have: self.value.len(),
            need: N,
        })
    }

    pub fn u8(&self) -> Result<u8, WireError> {
        self.fixed::<1>().map(|b| b[0])
    }

    pub fn u32(&self) -> Result<u32, WireError> {
        self.fixed::<4>().map(u32::from_ne_bytes)
    }

    pub fn i32(&self) -> Result<i32, WireError> {
        self.fixed::<4>().map(i32::from_ne_bytes)
    }

    pub fn u64(&self) -> Result<u64, WireError> {
        self.fixed::<8>().map(u64::from_ne_bytes)
    }

    /// A 32-bit value in network order (nftables' attributes).
    pub fn be32(&self) -> Result<u32, WireError> {
        self.fixed::<4>().map(u32::from_be_bytes)
    }

    pub fn bytes<const N: usize>(&self) -> Result<[u8; N], WireError> {
        self.fixed::<N>()
    }

    /// A NUL-terminated string's text (lossy UTF-8).
    pub fn text(&self) -> String {
        let v = self.value.split(|&c| c == 0).next().unwrap_or(&[]);
        String::from_utf8_lossy(v).into_owned()
    }

    /// The attributes nested in this one.
    pub fn nested_attributes(&self) -> Attrs<'a> {
        Attrs::new(self.value)
    }
}

/// The one attribute walk: each attribute checked against what is left,
/// the next at its aligned end. A bad one ends the walk with its error.
#[derive(Clone, Debug)]
pub struct Attrs<'a> {
    rest: &'a [u8],
}

impl<'a> Attrs<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Attrs { rest: bytes }
    }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<Attr<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        // Fewer bytes than a header: padding at the end.
        if self.rest.len() < NLA_HDRLEN {
            return None;
        }
        let b = self.rest;
        let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
        let raw = u16::from_ne_bytes([b[2], b[3]]);
        let kind = raw & NLA_TYPE_MASK;
        if len < NLA_HDRLEN || len > b.len() {
            self.rest = &[];
            return Some(Err(WireError::BadAttribute {
                kind,
                len,
                have: b.len(),
            }));
        }
        self.rest = b.get(align(len)..).unwrap_or(&[]);
        Some(Ok(Attr {
            kind,
            nested: raw & NLA_F_NESTED != 0,
            value: &b[NLA_HDRLEN..len],
        }))
    }
}

/// A request: the netlink header (`kind`, `flags`, sequence `seq`) and
/// `body` after it.
pub fn request(kind: u16, flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(NLMSG_HDRLEN + body.len());
    m.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(body);
    m
}

/// An attribute's bytes, padded: for building messages (and tests).
pub fn attribute(kind: u16, value: &[u8]) -> Vec<u8> {
    let mut a = Vec::with_capacity(align(NLA_HDRLEN + value.len()));
    a.extend_from_slice(&((NLA_HDRLEN + value.len()) as u16).to_ne_bytes());
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(value);
    a.resize(align(a.len()), 0);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RTM_NEWNEXTHOP, seq 7, a 4-byte family header (AF_INET, then 3
    /// zero bytes: not nhmsg's size, any will do), then NHA_ID = 5 and a
    /// 3-byte attribute (padded to 8).
    const ONE: [u8; 36] = [
        36, 0, 0, 0, 104, 0, 2, 0, 7, 0, 0, 0, 0, 0, 0, 0, // nlmsghdr
        2, 0, 0, 0, // family header
        8, 0, 1, 0, 5, 0, 0, 0, // NHA_ID 5
        7, 0, 0x03, 0x80, 9, 9, 9, 0, // type 0x8003 (nested 3), 3 bytes, 1 pad
    ];

    #[test]
    fn a_message_is_read_as_laid_out() {
        let m = Message::new_checked(&ONE).unwrap();
        assert_eq!((m.kind(), m.flags(), m.seq()), (104, 2, 7));
        let body = m.body("test", 4).unwrap();
        assert_eq!(body.byte(0), 2);
        let attrs: Vec<Attr> = body.attributes().collect::<Result<_, _>>().unwrap();
        assert_eq!(attrs.len(), 2);
        assert_eq!((attrs[0].kind, attrs[0].u32()), (1, Ok(5)));
        assert_eq!(
            (attrs[1].kind, attrs[1].nested, attrs[1].value),
            (3, true, &[9u8, 9, 9][..])
        );
        assert_eq!(
            attrs[1].u32(),
            Err(WireError::BadValue {
                kind: 3,
                have: 3,
                need: 4
            })
        );
        // Built back with the same helpers, byte for byte.
        let mut b = request(104, 2, 7, &[2, 0, 0, 0]);
        b.extend(attribute(1, &5u32.to_ne_bytes()));
        b.extend(attribute(0x8003, &[9, 9, 9]));
        b[0] = b.len() as u8;
        assert_eq!(b, ONE);
    }

    #[test]
    fn truncated_and_malformed_messages_are_errors() {
        assert_eq!(
            Message::new_checked(&ONE[..15]),
            Err(WireError::ShortHeader { have: 15, need: 16 })
        );
        // The length field says more than there is, or less than a header.
        assert_eq!(
            Message::new_checked(&ONE[..35]),
            Err(WireError::BadLength { len: 36, have: 35 })
        );
        let mut short = ONE;
        short[0] = 12;
        assert_eq!(
            Message::new_checked(&short),
            Err(WireError::BadLength { len: 12, have: 36 })
        );
        // A family header longer than the payload.
        let m = Message::new_checked(&ONE).unwrap();
        assert!(matches!(
            m.body("rtmsg", 21),
            Err(WireError::ShortBody { need: 21, .. })
        ));
        // An attribute running past its message, and one shorter than its
        // own header: the walk says so and stops.
        let mut over = ONE;
        over[28] = 12;
        let m = Message::new_checked(&over).unwrap();
        let got: Vec<_> = m.body("test", 4).unwrap().attributes().collect();
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[1],
            Err(WireError::BadAttribute {
                kind: 3,
                len: 12,
                have: 8
            })
        );
        let mut tiny = ONE;
        tiny[20] = 2;
        let got: Vec<_> = Message::new_checked(&tiny)
            .unwrap()
            .body("test", 4)
            .unwrap()
            .attributes()
            .collect();
        assert_eq!(
            got,
            vec![Err(WireError::BadAttribute {
                kind: 1,
                len: 2,
                have: 16
            })]
        );
        // Fewer than four bytes left: padding, not an attribute.
        assert_eq!(Attrs::new(&[1, 0, 0]).count(), 0);
    }

    #[test]
    fn a_buffer_of_messages_is_walked_at_aligned_ends() {
        // Two messages, the first 21 bytes long (3 bytes of padding), and
        // a truncated third.
        let mut first = request(3, 0, 1, &[0xaa, 0xbb, 0xcc, 0xdd, 0xee]);
        assert_eq!(first.len(), 21);
        first.resize(24, 0);
        let mut buf = first.clone();
        buf.extend(request(104, 0, 2, &[]));
        buf.extend(&request(104, 0, 3, &[1, 2, 3, 4])[..10]);
        let got: Vec<_> = messages(&buf).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[0].as_ref().unwrap().payload(),
            &[0xaa, 0xbb, 0xcc, 0xdd, 0xee]
        );
        assert_eq!(got[1].as_ref().unwrap().seq(), 2);
        assert_eq!(got[2], Err(WireError::ShortHeader { have: 10, need: 16 }));
        // An error answer carries the errno.
        let err = request(libc::NLMSG_ERROR as u16, 0, 9, &(-95i32).to_ne_bytes());
        assert_eq!(Message::new_checked(&err).unwrap().error(), Some(95));
    }
}
