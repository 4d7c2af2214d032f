@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Logging

/// The session's HTTP cache (RFC 9111, as a private cache): responses to `GET` that may be
/// stored, on disk for a default session and in memory for an ephemeral one, within a size
/// limit, least recently used first out.
///
/// On disk, each entry is one file (`<hash>.response`: a length-prefixed JSON record with the
/// body), written to a temporary file and renamed; `index.json` lists the entries with their
/// sizes and last use. A file that cannot be read or decoded is a miss, and is removed. All
/// state is guarded by `state`; file I/O runs on the caller's (nonisolated) task.
///
/// What is read back from disk is not trusted: an index entry is kept only if its file is the
/// one the cache writes for its key (a name in the cache directory) and its size is within the
/// capacity; others are dropped and logged, and the files they name are neither read nor
/// removed. An entry file is read only if it is a regular file (not through a symbolic link)
/// of a plausible size.
public final class HTTPCache: Sendable {
    private struct IndexEntry: Codable {
        var file: String
        var size: Int64
        var lastUse: Date
        /// Which store wrote the file (in this process; not saved): a file read while a newer
        /// one was stored is not kept in memory.
        var version: UInt64 = 0

        enum CodingKeys: String, CodingKey { case file, size, lastUse }
    }

    private struct State {
        var index: [String: IndexEntry] = [:]
        /// Decoded entries: every entry of a cache in memory; for a cache on disk, the
        /// recently used ones, within `memoryCapacity`, so a hit costs no file read.
        var memory: [String: CachedResponse] = [:]
        var memoryTotal: Int64 = 0
        var total: Int64 = 0
        var versions: UInt64 = 0
    }

    private let directory: URL?
    private let capacity: Int64
    private let memoryCapacity: Int64
    private let state = Locked(State())
    /// Held while `index.json` is written, so the last rename carries the latest index.
    private let indexWriter = Locked(())

    /// A cache in `directory` (nil: in memory) of at most `capacity` bytes. A cache on disk
    /// also keeps up to `memoryCapacity` bytes of recently used entries decoded in memory.
    /// `logger` hears of index entries that were dropped.
    package init(directory: URL?, capacity: Int64, memoryCapacity: Int64 = 4 << 20, logger: Logger? = nil) {
        self.directory = directory
        self.capacity = capacity
        self.memoryCapacity = directory == nil ? capacity : min(capacity, memoryCapacity)
        guard let directory else { return }
        let indexFile = directory.appendingPathComponent("index.json")
        guard let data = Self.readRegularFile(indexFile, limit: 64 << 20) else { return }
        guard let stored = try? JSONDecoder().decode([String: IndexEntry].self, from: data) else {
            logger?.warning("Ignored the cache index \(indexFile.path): it cannot be decoded")
            return
        }
        var index: [String: IndexEntry] = [:]
        for (key, entry) in stored {
            if let problem = Self.problem(with: entry, for: key, capacity: capacity) {
                logger?.warning("Dropped the cache index entry for \(key): \(problem); its file was left alone")
            } else {
                index[key] = entry
            }
        }
        state.withLock { state in
            state.index = index
            state.total = index.values.reduce(0) { $0 + $1.size }
        }
        if index.count != stored.count { writeIndex() }
    }

    /// Why an index entry read back from disk cannot be kept; nil when it is one the cache
    /// could have written: the file named after the key, a size within the capacity.
    private static func problem(with entry: IndexEntry, for key: String, capacity: Int64) -> String? {
        guard entry.file == fileName(for: key) else {
            return "it names the file \"\(entry.file)\", not the one the cache writes for it"
        }
        guard entry.size >= 0, entry.size <= capacity else {
            return "its size \(entry.size) is not within 0...\(capacity)"
        }
        return nil
    }

    package static func key(method: HTTPRequest.Method, url: String) -> String { "\(method.rawValue) \(url)" }

    // MARK: Reading

    package func entry(for key: String) -> CachedResponse? {
        let found = state.withLock { state -> (entry: CachedResponse?, file: String?, version: UInt64) in
            guard let indexed = state.index[key] else { return (nil, nil, 0) }
            state.index[key]?.lastUse = Date()
            return (state.memory[key], indexed.file, indexed.version)
        }
        if let entry = found.entry { return entry }
        guard let directory, let file = found.file else { return nil }
        guard let data = Self.readRegularFile(directory.appendingPathComponent(file), limit: capacity + 4 + (1 << 20)),
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

    /// Keeps `entry` decoded in memory, dropping the least recently used others beyond
    /// `limit` (from memory only: the index decides what is stored).
    private static func remember(_ entry: CachedResponse, in state: inout State, within limit: Int64) {
        let size = entry.size
        if let old = state.memory.updateValue(entry, forKey: entry.key) { state.memoryTotal -= old.size }
        state.memoryTotal += size
        while state.memoryTotal > limit,
            let oldest = state.memory.keys.min(by: {
                (state.index[$0]?.lastUse ?? .distantPast) < (state.index[$1]?.lastUse ?? .distantPast)
            })
        {
            state.memoryTotal -= state.memory.removeValue(forKey: oldest)?.size ?? 0
        }
    }

    // MARK: Writing

    package func store(_ entry: CachedResponse) {
        let size = entry.size
        guard size <= capacity else { return }
        let file = Self.fileName(for: entry.key)
        if let directory {
            guard let data = Self.encode(entry) else { return }
            do {
                try AtomicFile.replace(directory.appendingPathComponent(file), with: data, createsDirectory: true)
            } catch {
                return
            }
        }
        let evicted = state.withLock { state -> [IndexEntry] in
            if let old = state.index[entry.key] { state.total -= old.size }
            state.versions += 1
            state.index[entry.key] = IndexEntry(file: file, size: size, lastUse: Date(), version: state.versions)
            state.total += size
            var evicted: [IndexEntry] = []
            while state.total > capacity,
                let oldest = state.index.min(by: { $0.value.lastUse < $1.value.lastUse })
            {
                state.index[oldest.key] = nil
                state.memoryTotal -= state.memory.removeValue(forKey: oldest.key)?.size ?? 0
                state.total -= oldest.value.size
                evicted.append(oldest.value)
            }
            if state.index[entry.key] != nil { Self.remember(entry, in: &state, within: memoryCapacity) }
            return evicted
        }
        if let directory {
            for entry in evicted { unlink(directory.appendingPathComponent(entry.file).path) }
        }
        writeIndex()
    }

    /// Replaces the decoded copy of a stored entry (after a 304 that left it stale, so the copy
    /// on disk, with the same validators, would be revalidated anyway): no file is written.
    /// Nothing happens for an entry that is no longer stored.
    package func refresh(_ entry: CachedResponse) {
        state.withLock { state in
            guard state.index[entry.key] != nil else { return }
            state.index[entry.key]?.lastUse = Date()
            Self.remember(entry, in: &state, within: memoryCapacity)
        }
    }

    package func remove(_ key: String) {
        let removed = state.withLock { state -> IndexEntry? in
            guard let entry = state.index.removeValue(forKey: key) else { return nil }
            state.memoryTotal -= state.memory.removeValue(forKey: key)?.size ?? 0
            state.total -= entry.size
            return entry
        }
        if let removed, let directory {
            unlink(directory.appendingPathComponent(removed.file).path)
            writeIndex()
        }
    }

    /// Removes every stored response (and its file).
    public func removeAll() {
        let files = state.withLock { state -> [String] in
            defer { state = State(versions: state.versions) }
            return state.index.values.map(\.file)
        }
        if let directory {
            for file in files { unlink(directory.appendingPathComponent(file).path) }
            writeIndex()
        }
    }

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

    private func writeIndex() {
        guard let directory else { return }
        indexWriter.withLock { _ in
            let index = state.withLock { $0.index }
            guard let data = try? JSONEncoder().encode(index) else { return }
            try? AtomicFile.replace(directory.appendingPathComponent("index.json"), with: data)
        }
    }

    // MARK: Files

    private static func fileName(for key: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16) + ".response"
    }

    /// The bytes of `url` if it is a regular file (not reached through a symbolic link) of at
    /// most `limit` bytes; nil otherwise.
    private static func readRegularFile(_ url: URL, limit: Int64) -> Data? {
        let descriptor = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG, Int64(status.st_size) <= limit
        else { return nil }
        return try? FileHandle(fileDescriptor: descriptor, closeOnDealloc: false).readToEnd() ?? Data()
    }

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
