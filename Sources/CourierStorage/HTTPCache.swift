@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Logging

/// The session's HTTP cache (RFC 9111, as a private cache): responses to `GET` that may be
/// stored, on disk for a default session and in memory for an ephemeral one, within a size
/// limit, least recently used first out.
///
/// On disk, in the cache's directory:
///
/// - `<hash>.response`, one file per entry (a length-prefixed JSON record with the body),
///   written to a temporary file and renamed. A file that cannot be read or decoded is a
///   miss, and is removed.
/// - `index.json`, the index's snapshot: each entry's file, size and last use.
/// - `index.journal`, what changed since the snapshot: one JSON line per store or removal,
///   appended with one `write`, and the last uses of entries used since the previous line,
///   which go with the next one (a hit writes nothing). The snapshot is rewritten and the
///   journal emptied when the journal outgrows the index (`CacheIndexJournal`), so a store
///   costs about the same at any size. A cache directory with `index.json` alone (written
///   before the journal) opens as it is.
///
/// In memory, the index and two `RecencyList`s: every entry's, for eviction from disk, and that
/// of the entries kept decoded (all of them in memory, the recently used ones within
/// `memoryCapacity` on disk, so that a hit costs no file read). All state is guarded by
/// `state`; the journal has a lock of its own, taken first, and file I/O runs on the caller's
/// (nonisolated) task.
///
/// What is read back from disk is not trusted: an index entry or journal record is kept only
/// if its file is the one the cache writes for its key (a name in the cache directory) and its
/// size is within the capacity; others are dropped and logged, and the files they name are
/// neither read nor removed. An entry file is read only if it is a regular file (not through a
/// symbolic link) of a plausible size.
public final class HTTPCache: Sendable {
    private struct State {
        var index: [String: CacheIndexEntry] = [:]
        /// Every key in `index`, least recently used first: the order entries leave the cache.
        var recency = RecencyList<String>()
        /// Decoded entries: every entry of a cache in memory; for a cache on disk, the
        /// recently used ones, within `memoryCapacity`, so a hit costs no file read.
        var memory: [String: CachedResponse] = [:]
        /// The keys in `memory`, least recently used first: the order they leave memory.
        var memoryRecency = RecencyList<String>()
        var memoryTotal: Int64 = 0
        var total: Int64 = 0
        var versions: UInt64 = 0
        /// Keys used since the journal's last append (on disk only): their last uses are
        /// journaled with the next change, so that a hit does no I/O.
        var usedSinceAppend: Set<String> = []
    }

    private let directory: URL?
    private let capacity: Int64
    private let memoryCapacity: Int64
    private let state: Locked<State>
    /// The index's files (nil in memory). Held while the index changes and the change is
    /// appended, so that the journal's order is the index's; taken before `state`.
    private let journal: Locked<CacheIndexJournal>?

    /// A cache in `directory` (nil: in memory) of at most `capacity` bytes. A cache on disk
    /// also keeps up to `memoryCapacity` bytes of recently used entries decoded in memory.
    /// `logger` hears of index entries and journal records that were dropped.
    package init(directory: URL?, capacity: Int64, memoryCapacity: Int64 = 4 << 20, logger: Logger? = nil) {
        self.directory = directory
        self.capacity = capacity
        self.memoryCapacity = directory == nil ? capacity : min(capacity, memoryCapacity)
        guard let directory else {
            state = Locked(State())
            journal = nil
            return
        }
        let loaded = CacheIndexJournal.load(from: directory, capacity: capacity, logger: logger)
        var journal = CacheIndexJournal(directory: directory, after: loaded)
        // Rewritten at once when something was dropped, so that the next open does not log it
        // again and no record is appended to a line a crash cut short.
        if loaded.damaged || journal.shouldCompact(entries: loaded.entries.count) { journal.compact(loaded.entries) }
        var state = State(index: loaded.entries)
        for (key, _) in loaded.entries.sorted(by: { $0.value.lastUse < $1.value.lastUse }) { state.recency.use(key) }
        state.total = loaded.entries.values.reduce(0) { $0 + $1.size }
        self.state = Locked(state)
        self.journal = Locked(journal)
    }

    /// Journals the last uses not yet written (one append), so that the next open orders the
    /// entries by them.
    deinit {
        change { _ in ([], []) }
    }

    package static func key(method: HTTPRequest.Method, url: String) -> String { "\(method.rawValue) \(url)" }

    // MARK: Reading

    package func entry(for key: String) -> CachedResponse? {
        let found = state.withLock { state -> (entry: CachedResponse?, file: String?, version: UInt64) in
            guard let indexed = state.index[key] else { return (nil, nil, 0) }
            let decoded = Self.use(key, in: &state, journaled: journal != nil)
            return (decoded, indexed.file, indexed.version)
        }
        if let entry = found.entry { return entry }
        guard let directory, let file = found.file else { return nil }
        guard
            let data = CacheIndexJournal.readRegularFile(
                directory.appendingPathComponent(file), limit: capacity + 4 + (1 << 20)),
            let entry = Self.decode(data), entry.key == key
        else {
            remove(key)  // corrupt or missing: a miss
            return nil
        }
        state.withLock { state in
            if state.index[key]?.version == found.version { Self.remember(entry, in: &state, within: memoryCapacity) }
        }
        return entry
    }

    /// Marks the stored `key` used now; returns its decoded copy, if memory has one.
    private static func use(_ key: String, in state: inout State, journaled: Bool) -> CachedResponse? {
        state.index[key]?.lastUse = Date()
        state.recency.use(key)
        if journaled { state.usedSinceAppend.insert(key) }
        let decoded = state.memory[key]
        if decoded != nil { state.memoryRecency.use(key) }
        return decoded
    }

    /// Keeps `entry` decoded in memory, dropping the least recently used others beyond
    /// `limit` (from memory only: the index decides what is stored).
    private static func remember(_ entry: CachedResponse, in state: inout State, within limit: Int64) {
        if let old = state.memory.updateValue(entry, forKey: entry.key) { state.memoryTotal -= old.size }
        state.memoryTotal += entry.size
        state.memoryRecency.use(entry.key)
        while state.memoryTotal > limit, let oldest = state.memoryRecency.removeOldest() {
            state.memoryTotal -= state.memory.removeValue(forKey: oldest)?.size ?? 0
        }
    }

    /// Takes `key` out of the index, the eviction order and memory; the entry it had.
    private static func drop(_ key: String, from state: inout State) -> CacheIndexEntry? {
        guard let entry = state.index.removeValue(forKey: key) else { return nil }
        state.recency.remove(key)
        if let decoded = state.memory.removeValue(forKey: key) {
            state.memoryTotal -= decoded.size
            state.memoryRecency.remove(key)
        }
        state.total -= entry.size
        return entry
    }

    // MARK: Writing

    package func store(_ entry: CachedResponse) {
        let size = entry.size
        guard size <= capacity else { return }
        let file = CacheIndexJournal.fileName(for: entry.key)
        if let directory {
            guard let data = Self.encode(entry) else { return }
            do {
                try AtomicFile.replace(directory.appendingPathComponent(file), with: data, createsDirectory: true)
            } catch {
                return
            }
        }
        change { state in
            if let old = state.index[entry.key] { state.total -= old.size }
            state.versions += 1
            let indexed = CacheIndexEntry(file: file, size: size, lastUse: Date(), version: state.versions)
            state.index[entry.key] = indexed
            state.recency.use(entry.key)
            state.total += size
            var records = [CacheIndexRecord.store(entry.key, indexed)]
            var evicted: [String] = []
            while state.total > capacity, let oldest = state.recency.oldest,
                let dropped = Self.drop(oldest, from: &state)
            {
                records.append(.remove(oldest))
                evicted.append(dropped.file)
            }
            if state.index[entry.key] != nil { Self.remember(entry, in: &state, within: memoryCapacity) }
            return (records, evicted)
        }
    }

    /// Replaces the decoded copy of a stored entry (after a 304 that left it stale, so the copy
    /// on disk, with the same validators, would be revalidated anyway): no file is written.
    /// Nothing happens for an entry that is no longer stored.
    package func refresh(_ entry: CachedResponse) {
        state.withLock { state in
            guard state.index[entry.key] != nil else { return }
            _ = Self.use(entry.key, in: &state, journaled: journal != nil)
            Self.remember(entry, in: &state, within: memoryCapacity)
        }
    }

    package func remove(_ key: String) {
        change { state in
            guard let removed = Self.drop(key, from: &state) else { return ([], []) }
            return ([.remove(key)], [removed.file])
        }
    }

    /// Removes every stored response (and its file), and empties the index's snapshot and
    /// journal.
    public func removeAll() {
        guard let journal, let directory else {
            state.withLock { $0 = State(versions: $0.versions) }
            return
        }
        journal.withLock { journal in
            let files = state.withLock { state -> [String] in
                defer { state = State(versions: state.versions) }
                return state.index.values.map(\.file)
            }
            for file in files { unlink(directory.appendingPathComponent(file).path) }
            journal.compact([:])
        }
    }

    /// Applies `update` to the state; on disk, then removes the files it returns and journals
    /// the records it returns (after the last uses not yet journaled), or compacts instead
    /// when the journal is due. The files go first: a crash in between leaves index entries
    /// whose files are missing (misses, dropped when read), never files the index has lost.
    private func change(_ update: (inout State) -> (records: [CacheIndexRecord], files: [String])) {
        guard let journal, let directory else {
            _ = state.withLock { update(&$0) }
            return
        }
        journal.withLock { journal in
            let (records, files, count) = state.withLock { state in
                let (records, files) = update(&state)
                return (Self.takeUses(from: &state) + records, files, state.index.count)
            }
            for file in files { unlink(directory.appendingPathComponent(file).path) }
            guard !records.isEmpty else { return }
            if journal.shouldCompact(entries: count, adding: records.count) {
                // The snapshot has every last use: the pending ones need no line.
                let snapshot = state.withLock { state in
                    state.usedSinceAppend.removeAll()
                    return state.index
                }
                journal.compact(snapshot)
            } else {
                journal.append(records)
            }
        }
    }

    /// The last uses not yet journaled, as records; forgets them.
    private static func takeUses(from state: inout State) -> [CacheIndexRecord] {
        guard !state.usedSinceAppend.isEmpty else { return [] }
        defer { state.usedSinceAppend.removeAll(keepingCapacity: true) }
        return state.usedSinceAppend.compactMap { key in state.index[key].map { .use(key, at: $0.lastUse) } }
    }

    /// Bytes written to the index's files (snapshot and journal) by this cache: what the tests
    /// of a store's cost count.
    package var indexBytesWritten: Int64 { journal?.withLock { $0.bytesWritten } ?? 0 }

    /// The bytes the stored responses take (approximately: bodies and headers).
    public var totalSize: Int64 { state.withLock { $0.total } }
    /// How many responses are stored.
    public var count: Int { state.withLock { $0.index.count } }

    /// The stored response to `GET url`, fresh or stale, if any.
    public func storedResponse(for url: URL) -> RawResponse? {
        guard let entry = entry(for: Self.key(method: .get, url: url.absoluteString)) else { return nil }
        var raw = RawResponse(
            request: HTTPRequest(method: .get, url: url), response: entry.response, data: entry.body)
        raw.source = .cache
        return raw
    }

    /// Removes the stored response to `GET url`.
    public func removeResponse(for url: URL) {
        remove(Self.key(method: .get, url: url.absoluteString))
    }

    // MARK: Files

    /// A 4-byte length, the JSON record without the body, then the body.
    private static func encode(_ entry: CachedResponse) -> Data? {
        guard let json = try? JSONEncoder().encode(entry.record) else { return nil }
        var data = Data()
        var length = UInt32(json.count).bigEndian
        withUnsafeBytes(of: &length) { data.append(contentsOf: $0) }
        data.append(json)
        data.append(entry.body)
        return data
    }

    private static func decode(_ data: Data) -> CachedResponse? {
        guard data.count >= 4 else { return nil }
        let length = data.prefix(4).reduce(0) { $0 << 8 | Int($1) }
        guard data.count >= 4 + length,
            let record = try? JSONDecoder().decode(
                CachedResponse.Record.self, from: data.subdata(in: 4..<(4 + length)))
        else { return nil }
        if let bodyLength = record.bodyLength, bodyLength != data.count - 4 - length { return nil }
        return CachedResponse(record: record, body: data.subdata(in: (4 + length)..<data.count))
    }
}
