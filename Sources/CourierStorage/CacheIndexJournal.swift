import CourierCore
import Foundation
import Logging

/// `HTTPCache`'s index on disk: a snapshot (`index.json`, every entry with its file, size and
/// last use) and a journal after it (`index.journal`, one JSON record per line for each store,
/// removal and batch of uses since the snapshot, appended with one `write` to an `O_APPEND`
/// file). Rewriting the whole index at every store made a store cost in proportion to the
/// cache's size; a journal record costs the same at any size, and the snapshot is rewritten
/// (compaction) only when the journal has more records than `max(1000, entries)`, so its cost
/// per store stays bounded too.
///
/// Why a journal rather than an index rebuilt at open from the entry files: a file's name is a
/// hash, so rebuilding would open and decode every entry at each launch to learn its key, where
/// this reads two files; and the files hold no last use (keeping one there would cost a write
/// per hit, or leave the eviction order to modification times, which say when an entry was
/// stored, not used).
///
/// Compaction writes the new snapshot atomically, then replaces the journal with an empty
/// file. A crash in between leaves the new snapshot with the old journal, whose replay then
/// changes nothing: a store or removal sets what the snapshot already has, and a last use
/// never goes back before the snapshot's.
///
/// `HTTPCache` keeps it under a lock, held while the index changes and the change is appended,
/// so that the journal's order is the order the index changed in.
struct CacheIndexJournal {
    /// What `load` found.
    struct Loaded {
        var entries: [String: CacheIndexEntry] = [:]
        /// Records in the journal (those kept and those dropped), and its size.
        var records = 0
        var journalBytes: Int64 = 0
        /// The journal ends in part of a line.
        var lastLineUnfinished = false
        /// Something was dropped or could not be read: the files should be rewritten.
        var damaged = false
    }

    /// The snapshot and the journal are read only within this size: an index past it is not one
    /// the cache wrote (a record or an entry takes about a hundred bytes and a key). The journal
    /// is compacted before it reaches half of it, whatever its count of records.
    static let readLimit: Int64 = 64 << 20

    let directory: URL
    /// Records in the journal since the last compaction (or the last attempt at one: one that
    /// failed is tried again after as many records again, not at every change).
    private(set) var records: Int
    /// The journal's size, as far as this instance knows.
    private var journalBytes: Int64
    /// Bytes written to the snapshot and the journal by this instance (for tests).
    private(set) var bytesWritten: Int64 = 0
    /// An append failed part way: the next one starts with a newline, so that its first record
    /// is not glued to the fragment (which is then a line of its own, skipped when read).
    private var lastLineUnfinished = false

    var snapshotFile: URL { directory.appendingPathComponent("index.json") }
    var journalFile: URL { directory.appendingPathComponent("index.journal") }

    /// The index's files in `directory`, as `load` found them (`loaded`), or new ones.
    init(directory: URL, after loaded: Loaded = Loaded()) {
        self.directory = directory
        records = loaded.records
        journalBytes = loaded.journalBytes
        lastLineUnfinished = loaded.lastLineUnfinished
    }

    /// Whether the snapshot should be rewritten rather than `adding` more records appended:
    /// the journal would outgrow the `entries` it describes, or half its size limit.
    func shouldCompact(entries: Int, adding: Int = 0) -> Bool {
        records + adding > max(1000, entries) || journalBytes > Self.readLimit / 2
    }

    // MARK: Reading

    /// The index in `directory`: the snapshot, then the journal replayed over it. What is read is
    /// not trusted: an entry or record that `problem(with:for:capacity:)` refuses is dropped and
    /// logged (its file is neither read nor removed), a line that cannot be decoded is skipped,
    /// and a last line without its newline (cut short by a crash) is ignored. A directory with
    /// `index.json` alone (as the cache wrote before it kept a journal) reads the same way.
    static func load(from directory: URL, capacity: Int64, logger: Logger?) -> Loaded {
        var loaded = Loaded()
        let snapshotFile = directory.appendingPathComponent("index.json")
        var snapshot: [String: CacheIndexEntry] = [:]
        if let data = readIndexFile(snapshotFile, logger: logger, damaged: &loaded.damaged) {
            if let stored = try? JSONDecoder().decode([String: CacheIndexEntry].self, from: data) {
                for (key, entry) in stored {
                    if let problem = problem(with: entry, for: key, capacity: capacity) {
                        logger?.warning("Dropped the cache index entry for \(key): \(problem); its file was left alone")
                        loaded.damaged = true
                    } else {
                        snapshot[key] = entry
                    }
                }
            } else {
                logger?.warning("Ignored the cache index \(snapshotFile.path): it cannot be decoded")
                loaded.damaged = true
            }
        }
        loaded.entries = snapshot
        let journalFile = directory.appendingPathComponent("index.journal")
        guard let journal = readIndexFile(journalFile, logger: logger, damaged: &loaded.damaged) else { return loaded }
        loaded.journalBytes = Int64(journal.count)
        let decoder = JSONDecoder()
        var lineStart = journal.startIndex
        var undecodable = 0
        while let newline = journal[lineStart...].firstIndex(of: UInt8(ascii: "\n")) {
            defer { lineStart = journal.index(after: newline) }
            loaded.records += 1
            guard newline != lineStart else { continue }  // after an append that failed part way
            guard let record = try? decoder.decode(CacheIndexRecord.self, from: journal[lineStart..<newline]) else {
                undecodable += 1
                continue
            }
            if let problem = replay(record, over: snapshot, into: &loaded.entries, capacity: capacity) {
                logger?.warning(
                    "Dropped the cache journal record for \(record.key): \(problem); its file was left alone")
                loaded.damaged = true
            }
        }
        if undecodable > 0 {
            logger?.warning("Skipped \(undecodable) cache journal lines in \(journalFile.path) that cannot be decoded")
            loaded.damaged = true
        }
        if lineStart != journal.endIndex {
            // The last append did not finish (the process or the machine stopped): a record
            // counts once its newline is written. Compaction drops the fragment, which the next
            // record would otherwise be glued to.
            logger?.notice("Ignored an unfinished last line of the cache journal \(journalFile.path)")
            loaded.lastLineUnfinished = true
            loaded.damaged = true
        }
        return loaded
    }

    /// Applies `record` to `entries`; why it was refused, if it was. A last use never goes back
    /// before the snapshot's, so that replaying a journal that a crash left after a compaction
    /// gives the snapshot unchanged.
    static func replay(
        _ record: CacheIndexRecord, over snapshot: [String: CacheIndexEntry],
        into entries: inout [String: CacheIndexEntry],
        capacity: Int64
    ) -> String? {
        let key = record.key
        switch record.op {
        case .store:
            guard let file = record.file, let size = record.size, let lastUse = record.lastUse else {
                return "it is a store without a file, size or date"
            }
            let entry = CacheIndexEntry(
                file: file, size: size, lastUse: latest(lastUse, snapshot[key]?.lastUse, entries[key]?.lastUse))
            if let problem = problem(with: entry, for: key, capacity: capacity) { return problem }
            entries[key] = entry
        case .remove:
            entries[key] = nil
        case .use:
            guard let lastUse = record.lastUse else { return "it is a use without a date" }
            guard let current = entries[key]?.lastUse else { return nil }  // a use of an entry since removed
            entries[key]?.lastUse = latest(lastUse, snapshot[key]?.lastUse, current)
        }
        return nil
    }

    private static func latest(_ date: Date, _ others: Date?...) -> Date {
        others.reduce(date) { latest, other in other.map { max(latest, $0) } ?? latest }
    }

    /// Why an index entry read back from disk cannot be kept; nil when it is one the cache
    /// could have written: the file named after the key, a size within the capacity.
    static func problem(with entry: CacheIndexEntry, for key: String, capacity: Int64) -> String? {
        guard entry.file == fileName(for: key) else {
            return "it names the file \"\(entry.file)\", not the one the cache writes for it"
        }
        guard entry.size >= 0, entry.size <= capacity else {
            return "its size \(entry.size) is not within 0...\(capacity)"
        }
        return nil
    }

    /// The file the cache keeps `key`'s response in: an FNV-1a hash of the key, so that a name
    /// read back from disk can be checked against the key it claims.
    static func fileName(for key: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16) + ".response"
    }

    /// The snapshot or the journal at `url`; nil if there is none (an old cache has no journal,
    /// a new one no snapshot), or if what is there is not a file the cache wrote (logged, and
    /// `damaged` set, so that compaction replaces it).
    private static func readIndexFile(_ url: URL, logger: Logger?, damaged: inout Bool) -> Data? {
        if let data = readRegularFile(url, limit: readLimit) { return data }
        guard (try? FileManager.default.attributesOfItem(atPath: url.path)) != nil else { return nil }
        logger?.warning("Ignored the cache index file \(url.path): not a regular file within \(readLimit) bytes")
        damaged = true
        return nil
    }

    /// The bytes of `url` if it is a regular file (not reached through a symbolic link) of at
    /// most `limit` bytes; nil otherwise.
    static func readRegularFile(_ url: URL, limit: Int64) -> Data? {
        let descriptor = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG, Int64(status.st_size) <= limit
        else { return nil }
        return try? FileHandle(fileDescriptor: descriptor, closeOnDealloc: false).readToEnd() ?? Data()
    }

    // MARK: Writing

    /// Appends `changes` to the journal, all in one `write`, so that concurrent appends (from
    /// another cache on the same directory) do not interleave within a line. The file is opened
    /// at each append rather than held, so that a cache directory removed and made again (by
    /// the entry file written just before) gets the journal too. A failed append loses its
    /// records (entries whose files are missing are misses; files the index lost take space
    /// until their keys are stored again).
    mutating func append(_ changes: [CacheIndexRecord]) {
        guard !changes.isEmpty else { return }
        var lines = lastLineUnfinished ? [UInt8(ascii: "\n")] : []
        lines += CacheIndexJSON.lines(changes)
        records += changes.count
        let descriptor = open(journalFile.path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let written = lines.withUnsafeBytes { bytes -> Int in
            var offset = 0
            while offset < bytes.count {
                let count = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                offset += count
            }
            return offset
        }
        bytesWritten += Int64(written)
        journalBytes += Int64(written)
        lastLineUnfinished = written != lines.count
    }

    /// Writes `entries` as the new snapshot, then empties the journal. If the snapshot cannot be
    /// written, the journal stays as it is (it still describes the index with the old snapshot).
    mutating func compact(_ entries: [String: CacheIndexEntry]) {
        records = 0
        let data = Data(CacheIndexJSON.snapshot(entries))
        guard (try? AtomicFile.replace(snapshotFile, with: data)) != nil else { return }
        bytesWritten += Int64(data.count)
        // Replaced rather than truncated: a rename is atomic, and it replaces whatever is at
        // the path (a link, say) instead of following it.
        guard (try? AtomicFile.replace(journalFile, with: Data())) != nil else { return }
        journalBytes = 0
        lastLineUnfinished = false
    }
}
