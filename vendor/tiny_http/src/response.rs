use crate::common::{HTTPVersion, Header, StaticHeader, StatusCode};
use std::cmp::Ordering;
use std::sync::mpsc::Receiver;

use std::io::Result as IoResult;
use std::io::{self, Cursor, Read, Write};

use std::fs::File;

use std::str::FromStr;
use std::time::SystemTime;

/// Object representing an HTTP response whose purpose is to be given to a `Request`.
///
/// Some headers cannot be changed. Trying to define the value
/// of one of these will have no effect:
///
///  - `Connection`
///  - `Trailer`
///  - `Transfer-Encoding`
///  - `Upgrade`
///
/// Some headers have special behaviors:
///
///  - `Content-Encoding`: If you define this header, the library
///     will assume that the data from the `Read` object has the specified encoding
///     and will just pass-through.
///
///  - `Content-Length`: The length of the data should be set manually
///     using the `Reponse` object's API. Attempting to set the value of this
///     header will be equivalent to modifying the size of the data but the header
///     itself may not be present in the final result.
///
///  - `Content-Type`: You may only set this header to one value at a time. If you
///     try to set it more than once, the existing value will be overwritten. This
///     behavior differs from the default for most headers, which is to allow them to
///     be set multiple times in the same response.
///
pub struct Response<R> {
    reader: R,
    status_code: StatusCode,
    headers: Vec<Header>,
    // gosling patch: headers fixed at compile time, written after `headers` (PATCHES.md 21).
    static_headers: &'static [StaticHeader],
    data_length: Option<usize>,
    chunked_threshold: Option<usize>,
}

/// A `Response` without a template parameter.
pub type ResponseBox = Response<Box<dyn Read + Send>>;

/// Transfer encoding to use when sending the message.
/// Note that only *supported* encoding are listed here.
#[derive(Copy, Clone)]
enum TransferEncoding {
    Identity,
    Chunked,
}

impl FromStr for TransferEncoding {
    type Err = ();

    fn from_str(input: &str) -> Result<TransferEncoding, ()> {
        if input.eq_ignore_ascii_case("identity") {
            Ok(TransferEncoding::Identity)
        } else if input.eq_ignore_ascii_case("chunked") {
            Ok(TransferEncoding::Chunked)
        } else {
            Err(())
        }
    }
}

/// Calls `f` with the current date as the `Date` header's value.
fn with_date<T>(f: impl FnOnce(&[u8]) -> T) -> T {
    // gosling patch: formatted here (src/util/date.rs) instead of by the httpdate crate, once
    // a second per thread (a keep-alive connection's responses mostly share their second),
    // and written straight into the head (PATCHES.md 18).
    thread_local! {
        static LAST: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let secs = now.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != secs {
            *last = (secs, crate::util::date::imf_fixdate(now));
        }
        f(last.1.as_bytes())
    })
}

/// gosling patch: the headers the library adds itself (`Connection`/`Upgrade`, `Server`,
/// `Date`, and after the response's own, `Content-Length` or `Transfer-Encoding`), written
/// straight into the head instead of each becoming a `Header` (two allocations each) inserted
/// at the front of the response's list (PATCHES.md 18). The order on the wire is upstream's.
struct Added<'a> {
    upgrade: Option<&'a str>,
    server: bool,
    date: bool,
    transfer_encoding: Option<TransferEncoding>,
    content_length: Option<usize>,
}

fn push_header(head: &mut Vec<u8>, field: &[u8], value: &[u8]) {
    head.extend_from_slice(field);
    head.extend_from_slice(b": ");
    head.extend_from_slice(value);
    head.extend_from_slice(b"\r\n");
}

fn push_decimal(head: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    head.extend_from_slice(&digits[i..]);
}

fn write_message_header<W>(
    mut writer: W,
    http_version: &HTTPVersion,
    status_code: &StatusCode,
    headers: &[Header],
    static_headers: &[StaticHeader],
    added: Added<'_>,
) -> IoResult<()>
where
    W: Write,
{
    // gosling patch: the head is assembled in one buffer and written with one call (PATCHES.md
    // 17): upstream wrote each piece through `write!`, a dozen formatted writes per response,
    // each through the connection's writer lock.
    // gosling patch: the buffer is the thread's, kept from one response to the next
    // (PATCHES.md 21).
    thread_local! {
        static HEAD: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    HEAD.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        buffer.clear();
        write_head(&mut buffer, http_version, status_code, headers, static_headers, added);
        let result = writer.write_all(&buffer);
        if buffer.capacity() > 4096 {
            *buffer = Vec::new();
        }
        result
    })
}

fn write_head(
    head: &mut Vec<u8>,
    http_version: &HTTPVersion,
    status_code: &StatusCode,
    headers: &[Header],
    static_headers: &[StaticHeader],
    added: Added<'_>,
) {
    head.extend_from_slice(b"HTTP/");
    head.push(b'0' + (http_version.0 % 10));
    head.push(b'.');
    head.push(b'0' + (http_version.1 % 10));
    head.push(b' ');
    match status_code.0 {
        c @ 100..=999 => head.extend_from_slice(&[b'0' + (c / 100) as u8, b'0' + (c / 10 % 10) as u8, b'0' + (c % 10) as u8]),
        c => push_decimal(head, c as usize),
    }
    head.push(b' ');
    head.extend_from_slice(status_code.default_reason_phrase().as_bytes());
    head.extend_from_slice(b"\r\n");
    if let Some(upgrade) = added.upgrade {
        push_header(head, b"Connection", b"upgrade");
        push_header(head, b"Upgrade", upgrade.as_bytes());
    }
    if added.server {
        push_header(head, b"Server", b"tiny-http (Rust)");
    }
    if added.date {
        with_date(|date| push_header(head, b"Date", date));
    }
    for header in headers.iter() {
        push_header(head, header.field.as_str().as_ref(), header.value.as_str().as_ref());
    }
    for header in static_headers {
        push_header(head, header.field.as_bytes(), header.value.as_bytes());
    }
    match (added.transfer_encoding, added.content_length) {
        (Some(TransferEncoding::Chunked), _) => push_header(head, b"Transfer-Encoding", b"chunked"),
        (Some(TransferEncoding::Identity), Some(n)) => {
            head.extend_from_slice(b"Content-Length: ");
            push_decimal(head, n);
            head.extend_from_slice(b"\r\n");
        }
        _ => {}
    }
    head.extend_from_slice(b"\r\n");
}

/// gosling patch: bodies longer than this are written a buffer of this size at a time.
const BIG_BODY: usize = 64 << 10;

fn choose_transfer_encoding(
    status_code: StatusCode,
    request_headers: &[Header],
    http_version: &HTTPVersion,
    entity_length: &Option<usize>,
    has_additional_headers: bool,
    chunked_threshold: usize,
) -> TransferEncoding {
    use crate::util;

    // HTTP 1.0 doesn't support other encoding
    if *http_version <= (1, 0) {
        return TransferEncoding::Identity;
    }

    // Per section 3.3.1 of RFC7230:
    // A server MUST NOT send a Transfer-Encoding header field in any response with a status code
    // of 1xx (Informational) or 204 (No Content).
    if status_code.0 < 200 || status_code.0 == 204 {
        return TransferEncoding::Identity;
    }

    // parsing the request's TE header
    let user_request = request_headers
        .iter()
        // finding TE
        .find(|h| h.field.equiv("TE"))
        // getting its value
        .map(|h| h.value.clone())
        // getting the corresponding TransferEncoding
        .and_then(|value| {
            // getting list of requested elements
            let mut parse = util::parse_header_value(value.as_str()); // TODO: remove conversion

            // sorting elements by most priority
            parse.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(Ordering::Equal));

            // trying to parse each requested encoding
            for value in parse.iter() {
                // q=0 are ignored
                if value.1 <= 0.0 {
                    continue;
                }

                if let Ok(te) = TransferEncoding::from_str(value.0) {
                    return Some(te);
                }
            }

            // encoding not found
            None
        });

    if let Some(user_request) = user_request {
        return user_request;
    }

    // if we have additional headers, using chunked
    if has_additional_headers {
        return TransferEncoding::Chunked;
    }

    // if we don't have a Content-Length, or if the Content-Length is too big, using chunks writer
    if entity_length
        .as_ref()
        .map_or(true, |val| *val >= chunked_threshold)
    {
        return TransferEncoding::Chunked;
    }

    // Identity by default
    TransferEncoding::Identity
}

impl<R> Response<R>
where
    R: Read,
{
    /// Creates a new Response object.
    ///
    /// The `additional_headers` argument is a receiver that
    ///  may provide headers even after the response has been sent.
    ///
    /// All the other arguments are straight-forward.
    pub fn new(
        status_code: StatusCode,
        headers: Vec<Header>,
        data: R,
        data_length: Option<usize>,
        additional_headers: Option<Receiver<Header>>,
    ) -> Response<R> {
        let mut response = Response {
            reader: data,
            status_code,
            headers: Vec::new(),
            static_headers: &[],
            data_length,
            chunked_threshold: None,
        };

        // gosling patch: headers that `add_header` would keep as they are (none of the names it
        // drops or treats apart, at most one `Content-Type`) are kept in the caller's `Vec`;
        // upstream allocated room for 16 headers for every response, even one without any, and
        // moved each given header into it (PATCHES.md 21).
        let content_types = headers.iter().filter(|h| h.field.equiv("Content-Type")).count();
        let special = |h: &Header| {
            ["Connection", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length"].iter().any(|n| h.field.equiv(n))
        };
        if content_types <= 1 && !headers.iter().any(special) {
            response.headers = headers;
        } else {
            for h in headers {
                response.add_header(h)
            }
        }

        // dummy implementation
        if let Some(additional_headers) = additional_headers {
            for h in additional_headers.iter() {
                response.add_header(h)
            }
        }

        response
    }

    /// Set a threshold for `Content-Length` where we chose chunked
    /// transfer. Notice that chunked transfer might happen regardless of
    /// this threshold, for instance when the request headers indicate
    /// it is wanted or when there is no `Content-Length`.
    pub fn with_chunked_threshold(mut self, length: usize) -> Response<R> {
        self.chunked_threshold = Some(length);
        self
    }

    /// Convert the response into the underlying `Read` type.
    ///
    /// This is mainly useful for testing as it must consume the `Response`.
    pub fn into_reader(self) -> R {
        self.reader
    }

    /// The current `Content-Length` threshold for switching over to
    /// chunked transfer. The default is 32768 bytes. Notice that
    /// chunked transfer is mutually exclusive with sending a
    /// `Content-Length` header as per the HTTP spec.
    pub fn chunked_threshold(&self) -> usize {
        self.chunked_threshold.unwrap_or(32768)
    }

    /// Adds a header to the list.
    /// Does all the checks.
    pub fn add_header<H>(&mut self, header: H)
    where
        H: Into<Header>,
    {
        let header = header.into();

        // ignoring forbidden headers
        if header.field.equiv("Connection")
            || header.field.equiv("Trailer")
            || header.field.equiv("Transfer-Encoding")
            || header.field.equiv("Upgrade")
        {
            return;
        }

        // if the header is Content-Length, setting the data length
        if header.field.equiv("Content-Length") {
            if let Ok(val) = usize::from_str(header.value.as_str()) {
                self.data_length = Some(val)
            }

            return;
        // if the header is Content-Type and it's already set, overwrite it
        } else if header.field.equiv("Content-Type") {
            if let Some(content_type_header) = self
                .headers
                .iter_mut()
                .find(|h| h.field.equiv("Content-Type"))
            {
                content_type_header.value = header.value;
                return;
            }
        }

        self.headers.push(header);
    }

    /// Returns the same request, but with an additional header.
    ///
    /// Some headers cannot be modified and some other have a
    ///  special behavior. See the documentation above.
    #[inline]
    pub fn with_header<H>(mut self, header: H) -> Response<R>
    where
        H: Into<Header>,
    {
        self.add_header(header.into());
        self
    }

    /// Returns the same request, but with a different status code.
    #[inline]
    pub fn with_status_code<S>(mut self, code: S) -> Response<R>
    where
        S: Into<StatusCode>,
    {
        self.status_code = code.into();
        self
    }

    /// gosling patch (PATCHES.md 21): the same response with `headers` too, written after its
    /// other headers, as they are (no allocation; `StaticHeader::new` checked them). Replaces
    /// static headers given before; never give a header both ways.
    pub fn with_static_headers(mut self, headers: &'static [StaticHeader]) -> Self {
        self.static_headers = headers;
        self
    }

    /// Returns the same request, but with different data.
    pub fn with_data<S>(self, reader: S, data_length: Option<usize>) -> Response<S>
    where
        S: Read,
    {
        Response {
            reader,
            headers: self.headers,
            static_headers: self.static_headers,
            status_code: self.status_code,
            data_length,
            chunked_threshold: self.chunked_threshold,
        }
    }

    /// Prints the HTTP response to a writer.
    ///
    /// This function is the one used to send the response to the client's socket.
    /// Therefore you shouldn't expect anything pretty-printed or even readable.
    ///
    /// The HTTP version and headers passed as arguments are used to
    ///  decide which features (most notably, encoding) to use.
    ///
    /// Note: does not flush the writer.
    pub fn raw_print<W: Write>(
        mut self,
        mut writer: W,
        http_version: HTTPVersion,
        request_headers: &[Header],
        do_not_send_body: bool,
        upgrade: Option<&str>,
    ) -> IoResult<()> {
        let mut transfer_encoding = Some(choose_transfer_encoding(
            self.status_code,
            request_headers,
            &http_version,
            &self.data_length,
            false, /* TODO */
            self.chunked_threshold(),
        ));

        let date = !self.headers.iter().any(|h| h.field.equiv("Date"));
        let server = !self.headers.iter().any(|h| h.field.equiv("Server"));
        if upgrade.is_some() {
            transfer_encoding = None;
        }

        // if the transfer encoding is identity, the content length must be known ; therefore if
        // we don't know it, we buffer the entire response first here
        // while this is an expensive operation, it is only ever needed for clients using HTTP 1.0
        // gosling patch: borrowed, not boxed (one allocation less per response).
        let mut buffered = None;
        let data_length = match (self.data_length, transfer_encoding) {
            (Some(l), _) => Some(l),
            (None, Some(TransferEncoding::Identity)) => {
                let mut buf = Vec::new();
                self.reader.read_to_end(&mut buf)?;
                let l = buf.len();
                buffered = Some(Cursor::new(buf));
                Some(l)
            }
            _ => None,
        };
        let reader: &mut dyn Read = match buffered.as_mut() {
            Some(cursor) => cursor,
            None => &mut self.reader,
        };

        // checking whether to ignore the body of the response
        let do_not_send_body = do_not_send_body
            || match self.status_code.0 {
                // status code 1xx, 204 and 304 MUST not include a body
                100..=199 | 204 | 304 => true,
                _ => false,
            };

        // sending headers
        write_message_header(
            writer.by_ref(),
            &http_version,
            &self.status_code,
            &self.headers,
            self.static_headers,
            Added { upgrade, server, date, transfer_encoding, content_length: data_length },
        )?;

        // sending the body
        if !do_not_send_body {
            match transfer_encoding {
                Some(TransferEncoding::Chunked) => {
                    // gosling patch: our encoder (src/util/chunked.rs), finished explicitly
                    // so a failed last chunk is reported.
                    let mut writer = crate::util::ChunkedEncoder::new(writer);
                    io::copy(reader, &mut writer)?;
                    writer.finish()?;
                }

                Some(TransferEncoding::Identity) => {
                    assert!(data_length.is_some());
                    let data_length = data_length.unwrap();

                    // gosling patch: a large body in 64 KiB writes, not io::copy's 8 KiB
                    // ones; a small one as before (its stack buffer, no allocation).
                    if data_length > BIG_BODY {
                        let mut buf = vec![0u8; BIG_BODY];
                        loop {
                            let n = match reader.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => n,
                                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                                Err(e) => return Err(e),
                            };
                            writer.write_all(&buf[..n])?;
                        }
                    } else if data_length >= 1 {
                        io::copy(reader, &mut writer)?;
                    }
                }

                _ => (),
            }
        }

        Ok(())
    }

    /// Retrieves the current value of the `Response` status code
    pub fn status_code(&self) -> StatusCode {
        self.status_code
    }

    /// Retrieves the current value of the `Response` data length
    pub fn data_length(&self) -> Option<usize> {
        self.data_length
    }

    /// Retrieves the current list of `Response` headers
    pub fn headers(&self) -> &[Header] {
        &self.headers
    }
}

impl<R> Response<R>
where
    R: Read + Send + 'static,
{
    /// Turns this response into a `Response<Box<Read + Send>>`.
    pub fn boxed(self) -> ResponseBox {
        Response {
            reader: Box::new(self.reader) as Box<dyn Read + Send>,
            status_code: self.status_code,
            headers: self.headers,
            static_headers: self.static_headers,
            data_length: self.data_length,
            chunked_threshold: self.chunked_threshold,
        }
    }
}

impl Response<File> {
    /// Builds a new `Response` from a `File`.
    ///
    /// The `Content-Type` will **not** be automatically detected,
    ///  you must set it yourself.
    pub fn from_file(file: File) -> Response<File> {
        let file_size = file.metadata().ok().map(|v| v.len() as usize);

        Response::new(
            StatusCode(200),
            Vec::with_capacity(0),
            file,
            file_size,
            None,
        )
    }
}

impl Response<Cursor<Vec<u8>>> {
    pub fn from_data<D>(data: D) -> Response<Cursor<Vec<u8>>>
    where
        D: Into<Vec<u8>>,
    {
        let data = data.into();
        let data_len = data.len();

        Response::new(
            StatusCode(200),
            Vec::with_capacity(0),
            Cursor::new(data),
            Some(data_len),
            None,
        )
    }

    pub fn from_string<S>(data: S) -> Response<Cursor<Vec<u8>>>
    where
        S: Into<String>,
    {
        let data = data.into();
        let data_len = data.len();

        Response::new(
            StatusCode(200),
            vec![
                Header::from_bytes(&b"Content-Type"[..], &b"text/plain; charset=UTF-8"[..])
                    .unwrap(),
            ],
            Cursor::new(data.into_bytes()),
            Some(data_len),
            None,
        )
    }
}

impl Response<io::Empty> {
    /// Builds an empty `Response` with the given status code.
    pub fn empty<S>(status_code: S) -> Response<io::Empty>
    where
        S: Into<StatusCode>,
    {
        Response::new(
            status_code.into(),
            Vec::with_capacity(0),
            io::empty(),
            Some(0),
            None,
        )
    }

    /// DEPRECATED. Use `empty` instead.
    pub fn new_empty(status_code: StatusCode) -> Response<io::Empty> {
        Response::empty(status_code)
    }
}

impl Clone for Response<io::Empty> {
    fn clone(&self) -> Response<io::Empty> {
        Response {
            reader: io::empty(),
            status_code: self.status_code,
            headers: self.headers.clone(),
            static_headers: self.static_headers,
            data_length: self.data_length,
            chunked_threshold: self.chunked_threshold,
        }
    }
}
