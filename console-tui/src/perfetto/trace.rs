//! The part of Perfetto's trace format the export writes: a `Trace` is a stream of
//! `TracePacket`s; a packet describes a track (`TrackDescriptor`, with a process or a
//! thread) or carries one event on a track (`TrackEvent`: a slice's begin or end, or an
//! instant, with its arguments as `DebugAnnotation`s and its flow ids).
//!
//! The messages are declared here with prost, under Perfetto's names and with the field
//! numbers of its `perfetto_trace.proto`; only the fields the export sets are declared.
//! Perfetto's schema is proto2, where a repeated number is not packed, and Perfetto's own
//! reader takes such fields one value at a time: so the flow ids are written unpacked.
//!
//! A file is one `Trace`, and since a message's repeated field may come in pieces, a file
//! can be written as several `Trace` messages one after another: [`PacketWriter`] writes
//! a batch of packets at a time, so memory holds one batch, not the trace.

use prost::Message;
use std::io::{self, Write};

/// The whole file: its packets.
#[derive(Clone, PartialEq, Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// One packet: a track's description or an event on a track.
#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    /// Nanoseconds, on Perfetto's default clock (the export uses the runtime's uptime).
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// The writer's sequence: the export writes every packet on one.
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// [`SEQ_INCREMENTAL_STATE_CLEARED`] on a sequence's first packet.
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(oneof = "PacketData", tags = "11, 60")]
    pub data: Option<PacketData>,
}

/// `TracePacket.sequence_flags`: the sequence starts here with nothing to remember. The
/// export interns nothing, so no packet depends on earlier ones.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;

/// What a packet carries (one of `TracePacket`'s `data` fields).
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum PacketData {
    #[prost(message, tag = "11")]
    TrackEvent(TrackEvent),
    #[prost(message, tag = "60")]
    TrackDescriptor(TrackDescriptor),
}

/// A track: a process's, a thread's (with `thread`), or a named one under a parent.
#[derive(Clone, PartialEq, Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
}

/// The process a track stands for.
#[derive(Clone, PartialEq, Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// The thread a track stands for (it joins its process's track by `pid`).
#[derive(Clone, PartialEq, Message)]
pub struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// One event on a track.
#[derive(Clone, PartialEq, Message)]
pub struct TrackEvent {
    #[prost(enumeration = "EventType", optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// The slice's or instant's name (a slice's end has none).
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// Flows that start at (or pass through) this event.
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    /// Flows that end at this event.
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `TrackEvent.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum EventType {
    SliceBegin = 1,
    SliceEnd = 2,
    Instant = 3,
}

/// One argument of an event, shown in the UI's details of the slice.
#[derive(Clone, PartialEq, Message)]
pub struct DebugAnnotation {
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
    #[prost(oneof = "AnnotationValue", tags = "3, 5, 6")]
    pub value: Option<AnnotationValue>,
}

/// An argument's value.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AnnotationValue {
    #[prost(uint64, tag = "3")]
    Uint(u64),
    #[prost(double, tag = "5")]
    Double(f64),
    #[prost(string, tag = "6")]
    String(String),
}

impl DebugAnnotation {
    /// An argument named `name`.
    pub fn new(name: &str, value: AnnotationValue) -> DebugAnnotation {
        DebugAnnotation { name: Some(name.to_string()), value: Some(value) }
    }
}

/// The packets per `Trace` message written at once.
const BATCH: usize = 4096;

/// Writes packets to a file as a series of `Trace` messages, all on one sequence; the
/// first packet written clears the sequence's state.
pub struct PacketWriter<W: Write> {
    out: W,
    batch: Vec<TracePacket>,
    buf: Vec<u8>,
    first: bool,
    /// Packets written so far.
    pub written: u64,
}

/// The sequence every packet of an export is on.
pub const SEQUENCE: u32 = 1;

impl<W: Write> PacketWriter<W> {
    /// A writer into `out`.
    pub fn new(out: W) -> PacketWriter<W> {
        PacketWriter { out, batch: Vec::with_capacity(BATCH), buf: Vec::new(), first: true, written: 0 }
    }

    /// Add a packet carrying `data` at `timestamp` (descriptors have none).
    pub fn push(&mut self, timestamp: Option<u64>, data: PacketData) -> io::Result<()> {
        let sequence_flags = std::mem::take(&mut self.first).then_some(SEQ_INCREMENTAL_STATE_CLEARED);
        self.batch.push(TracePacket {
            timestamp,
            trusted_packet_sequence_id: Some(SEQUENCE),
            sequence_flags,
            data: Some(data),
        });
        self.written += 1;
        if self.batch.len() >= BATCH {
            self.write_batch()?;
        }
        Ok(())
    }

    fn write_batch(&mut self) -> io::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.buf.clear();
        let trace = Trace { packet: std::mem::take(&mut self.batch) };
        trace.encode(&mut self.buf).map_err(io::Error::other)?;
        self.batch = trace.packet;
        self.batch.clear();
        self.out.write_all(&self.buf)
    }

    /// Write what is batched, flush, and give the output back.
    pub fn finish(mut self) -> io::Result<W> {
        self.write_batch()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the keys (field number, wire type) of a message's top-level fields.
    fn keys(mut bytes: &[u8]) -> Vec<(u32, prost::encoding::WireType)> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let (tag, wire) = prost::encoding::decode_key(&mut bytes).unwrap();
            out.push((tag, wire));
            prost::encoding::skip_field(wire, tag, &mut bytes, Default::default()).unwrap();
        }
        out
    }

    /// Perfetto's reader takes proto2 repeated numbers one field per value: two flow ids
    /// must be two fixed64 fields, not one packed run.
    #[test]
    fn flow_ids_are_written_unpacked() {
        use prost::encoding::WireType;
        let e = TrackEvent { flow_ids: vec![7, 8], terminating_flow_ids: vec![9], ..Default::default() };
        let k = keys(&e.encode_to_vec());
        assert_eq!(k, vec![(47, WireType::SixtyFourBit), (47, WireType::SixtyFourBit), (48, WireType::SixtyFourBit)]);
    }

    /// Several `Trace` messages in a row read back as one holding all their packets, in
    /// order, and only the first packet clears the sequence.
    #[test]
    fn batches_concatenate_into_one_trace() {
        let mut w = PacketWriter::new(Vec::new());
        for i in 0..(BATCH as u64 + 10) {
            let e = TrackEvent { r#type: Some(EventType::Instant as i32), track_uuid: Some(i), ..Default::default() };
            w.push(Some(i), PacketData::TrackEvent(e)).unwrap();
        }
        let bytes = w.finish().unwrap();
        let t = Trace::decode(&bytes[..]).unwrap();
        assert_eq!(t.packet.len(), BATCH + 10);
        assert!(t.packet.iter().enumerate().all(|(i, p)| p.timestamp == Some(i as u64)));
        assert_eq!(t.packet[0].sequence_flags, Some(SEQ_INCREMENTAL_STATE_CLEARED));
        assert!(t.packet[1..].iter().all(|p| p.sequence_flags.is_none()));
    }
}
