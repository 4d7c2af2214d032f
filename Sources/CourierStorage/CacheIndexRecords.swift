import Foundation

/// What the index knows of one stored response: an entry of the snapshot (`index.json`, an
/// object from each key to its entry).
struct CacheIndexEntry: Decodable, Equatable {
    var file: String
    var size: Int64
    var lastUse: Date
    /// Which store wrote the file (in this process; not saved): a file read while a newer
    /// one was stored is not kept in memory.
    var version: UInt64 = 0

    enum CodingKeys: String, CodingKey { case file, size, lastUse }

    static func == (left: CacheIndexEntry, right: CacheIndexEntry) -> Bool {
        left.file == right.file && left.size == right.size && left.lastUse == right.lastUse
    }
}

/// One line of the journal (`index.journal`): a change to the index since its snapshot.
struct CacheIndexRecord: Decodable, Equatable {
    enum Operation: String, Decodable {
        /// The key's response was stored (in `file`, `size` bytes) at `lastUse`.
        case store
        /// The key's response is gone.
        case remove
        /// The key's response was used at `lastUse`.
        case use
    }

    var op: Operation
    var key: String
    var file: String?
    var size: Int64?
    var lastUse: Date?

    static func store(_ key: String, _ entry: CacheIndexEntry) -> CacheIndexRecord {
        CacheIndexRecord(op: .store, key: key, file: entry.file, size: entry.size, lastUse: entry.lastUse)
    }

    static func remove(_ key: String) -> CacheIndexRecord { CacheIndexRecord(op: .remove, key: key) }

    static func use(_ key: String, at date: Date) -> CacheIndexRecord {
        CacheIndexRecord(op: .use, key: key, lastUse: date)
    }
}

/// The JSON text of the journal's lines and of the snapshot, written by hand: their shapes are
/// few and fixed, and `JSONEncoder` took several times as long, which mattered most for a
/// compaction (it holds the journal's lock, so stores wait for it; Benchmarks.md, "Measurements
/// behind the code"). They are read back with `JSONDecoder` (a date as seconds since 2001, as
/// it decodes `Date` by default), which is strict about what it accepts.
enum CacheIndexJSON {
    /// One line per record, each ending in a newline.
    static func lines(_ records: [CacheIndexRecord]) -> [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(records.count * 160)
        for record in records {
            text.append(contentsOf: #"{"op":"#.utf8)
            string(record.op.rawValue, into: &text)
            text.append(contentsOf: #","key":"#.utf8)
            string(record.key, into: &text)
            if let file = record.file {
                text.append(contentsOf: #","file":"#.utf8)
                string(file, into: &text)
            }
            if let size = record.size { text.append(contentsOf: #","size":\#(size)"#.utf8) }
            if let lastUse = record.lastUse {
                text.append(contentsOf: #","lastUse":"#.utf8)
                date(lastUse, into: &text)
            }
            text.append(contentsOf: "}\n".utf8)
        }
        return text
    }

    /// The snapshot: an object from each key to its file, size and last use.
    static func snapshot(_ entries: [String: CacheIndexEntry]) -> [UInt8] {
        var text: [UInt8] = [UInt8(ascii: "{")]
        text.reserveCapacity(entries.count * 140 + 2)
        for (key, entry) in entries {
            if text.count > 1 { text.append(UInt8(ascii: ",")) }
            string(key, into: &text)
            text.append(contentsOf: #":{"file":"#.utf8)
            string(entry.file, into: &text)
            text.append(contentsOf: #","size":\#(entry.size),"lastUse":"#.utf8)
            date(entry.lastUse, into: &text)
            text.append(UInt8(ascii: "}"))
        }
        text.append(UInt8(ascii: "}"))
        return text
    }

    /// `value` as a JSON string (RFC 8259 section 7): quotation mark, reverse solidus and the
    /// control characters escaped, everything else as its UTF-8.
    static func string(_ value: String, into text: inout [UInt8]) {
        text.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                text.append(UInt8(ascii: "\\"))
                text.append(byte)
            case 0..<0x20:
                text.append(contentsOf: #"\u00"#.utf8)
                text.append(hexDigit(byte >> 4))
                text.append(hexDigit(byte & 0xf))
            default:
                text.append(byte)
            }
        }
        text.append(UInt8(ascii: "\""))
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    /// Seconds since 2001 (`Date`'s reference date), as few digits as read back to the same
    /// `Double` (Swift's `description`); a date that is no number (never made here) as 0.
    private static func date(_ value: Date, into text: inout [UInt8]) {
        let seconds = value.timeIntervalSinceReferenceDate
        text.append(contentsOf: (seconds.isFinite ? seconds.description : "0").utf8)
    }
}
