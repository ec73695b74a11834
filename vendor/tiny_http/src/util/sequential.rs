use std::io::Result as IoResult;
use std::io::{BufRead, Read, Write};

use std::sync::{Arc, Condvar, Mutex};

use std::mem;

/// gosling patch: a one-value hand-off from one request to the next (the reader, or the
/// writer's turn), in place of an `mpsc` channel per request: a channel allocates its counter
/// (cache-line aligned) and a block of slots on the first send, which cost more than the rest
/// of a small request's handling (PATCHES.md 17).
struct Handoff<T>(Arc<(Mutex<Option<T>>, Condvar)>);

impl<T> Clone for Handoff<T> {
    fn clone(&self) -> Self {
        Handoff(self.0.clone())
    }
}

fn handoff<T>() -> (Handoff<T>, Handoff<T>) {
    let h = Handoff(Arc::new((Mutex::new(None), Condvar::new())));
    (h.clone(), h)
}

impl<T> Handoff<T> {
    fn send(&self, v: T) {
        let (slot, ready) = &*self.0;
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
        ready.notify_one();
    }

    /// Waits for the value: the previous request always hands it over when it is dropped
    /// (one request in flight per connection, PATCHES.md 11, so it is already there).
    fn recv(&self) -> T {
        let (slot, ready) = &*self.0;
        let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(v) = guard.take() {
                return v;
            }
            guard = ready.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }
}

pub struct SequentialReaderBuilder<R>
where
    R: Read + Send,
{
    inner: SequentialReaderBuilderInner<R>,
}

enum SequentialReaderBuilderInner<R>
where
    R: Read + Send,
{
    First(R),
    NotFirst(Handoff<R>),
}

pub struct SequentialReader<R>
where
    R: Read + Send,
{
    inner: SequentialReaderInner<R>,
    next: Handoff<R>,
}

enum SequentialReaderInner<R>
where
    R: Read + Send,
{
    MyTurn(R),
    Waiting(Handoff<R>),
    Empty,
}

pub struct SequentialWriterBuilder<W>
where
    W: Write + Send,
{
    writer: Arc<Mutex<W>>,
    next_trigger: Option<Handoff<()>>,
}

pub struct SequentialWriter<W>
where
    W: Write + Send,
{
    trigger: Option<Handoff<()>>,
    writer: Arc<Mutex<W>>,
    on_finish: Handoff<()>,
}

impl<R: Read + Send> SequentialReaderBuilder<R> {
    pub fn new(reader: R) -> SequentialReaderBuilder<R> {
        SequentialReaderBuilder {
            inner: SequentialReaderBuilderInner::First(reader),
        }
    }
}

impl<W: Write + Send> SequentialWriterBuilder<W> {
    pub fn new(writer: W) -> SequentialWriterBuilder<W> {
        SequentialWriterBuilder {
            writer: Arc::new(Mutex::new(writer)),
            next_trigger: None,
        }
    }
}

impl<R: Read + Send> Iterator for SequentialReaderBuilder<R> {
    type Item = SequentialReader<R>;

    fn next(&mut self) -> Option<SequentialReader<R>> {
        let (tx, rx) = handoff();

        let inner = mem::replace(&mut self.inner, SequentialReaderBuilderInner::NotFirst(rx));

        match inner {
            SequentialReaderBuilderInner::First(reader) => Some(SequentialReader {
                inner: SequentialReaderInner::MyTurn(reader),
                next: tx,
            }),

            SequentialReaderBuilderInner::NotFirst(previous) => Some(SequentialReader {
                inner: SequentialReaderInner::Waiting(previous),
                next: tx,
            }),
        }
    }
}

impl<W: Write + Send> Iterator for SequentialWriterBuilder<W> {
    type Item = SequentialWriter<W>;
    fn next(&mut self) -> Option<SequentialWriter<W>> {
        let (tx, rx) = handoff();
        let mut next_next_trigger = Some(rx);
        ::std::mem::swap(&mut next_next_trigger, &mut self.next_trigger);

        Some(SequentialWriter {
            trigger: next_next_trigger,
            writer: self.writer.clone(),
            on_finish: tx,
        })
    }
}

impl<R: Read + Send> Read for SequentialReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> IoResult<usize> {
        let mut reader = match self.inner {
            SequentialReaderInner::MyTurn(ref mut reader) => return reader.read(buf),
            SequentialReaderInner::Waiting(ref mut recv) => recv.recv(),
            SequentialReaderInner::Empty => unreachable!(),
        };

        let result = reader.read(buf);
        self.inner = SequentialReaderInner::MyTurn(reader);
        result
    }
}

/// gosling patch: the head is read a buffer at a time (PATCHES.md 18) instead of a byte at
/// a time through `Read::bytes`.
impl<R: BufRead + Send> BufRead for SequentialReader<R> {
    fn fill_buf(&mut self) -> IoResult<&[u8]> {
        if let SequentialReaderInner::Waiting(_) = self.inner {
            if let SequentialReaderInner::Waiting(recv) = mem::replace(&mut self.inner, SequentialReaderInner::Empty) {
                self.inner = SequentialReaderInner::MyTurn(recv.recv());
            }
        }
        match self.inner {
            SequentialReaderInner::MyTurn(ref mut reader) => reader.fill_buf(),
            _ => unreachable!(),
        }
    }

    fn consume(&mut self, amt: usize) {
        if let SequentialReaderInner::MyTurn(ref mut reader) = self.inner {
            reader.consume(amt)
        }
    }
}

impl<W: Write + Send> Write for SequentialWriter<W> {
    fn write(&mut self, buf: &[u8]) -> IoResult<usize> {
        if let Some(v) = self.trigger.as_mut() {
            v.recv()
        }
        self.trigger = None;

        self.writer.lock().unwrap().write(buf)
    }

    fn flush(&mut self) -> IoResult<()> {
        if let Some(v) = self.trigger.as_mut() {
            v.recv()
        }
        self.trigger = None;

        self.writer.lock().unwrap().flush()
    }
}

impl<R> Drop for SequentialReader<R>
where
    R: Read + Send,
{
    fn drop(&mut self) {
        let inner = mem::replace(&mut self.inner, SequentialReaderInner::Empty);

        match inner {
            SequentialReaderInner::MyTurn(reader) => {
                self.next.send(reader);
            }
            SequentialReaderInner::Waiting(recv) => {
                let reader = recv.recv();
                self.next.send(reader);
            }
            SequentialReaderInner::Empty => (),
        }
    }
}

impl<W> Drop for SequentialWriter<W>
where
    W: Write + Send,
{
    fn drop(&mut self) {
        self.on_finish.send(());
    }
}
