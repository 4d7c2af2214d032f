import Foundation
import HTTPTypes

/// The session's HTTP cache (RFC 9111, as a private cache): responses to `GET` that may be
/// stored, on disk for a default session and in memory for an ephemeral one, within a size
/// limit, least recently used first out.
///
/// On disk, each entry is one file (`<hash>.response`: a length-prefixed JSON record with the
/// body), written to a temporary file and renamed; `index.json` lists the entries with their
/// sizes and last use. A file that cannot be read or decoded is a miss, and is removed. All
/// state is guarded by `state`; file I/O runs on the caller's (nonisolated) task.
public final class HTTPCache: Sendable {
    private struct IndexEntry: Codable {
        var file: String
        var size: Int64
        var lastUse: Date
    }

    private struct State {
        var index: [String: IndexEntry] = [:]
        var memory: [String: CachedResponse] = [:]
        var total: Int64 = 0
    }

    private let directory: URL?
    private let capacity: Int64
    private let state = Locked(State())
    /// Held while `index.json` is written, so the last rename carries the latest index.
    private let indexWriter = Locked(())

    /// A cache in `directory` (nil: in memory) of at most `capacity` bytes.
    init(directory: URL?, capacity: Int64) {
        self.directory = directory
        self.capacity = capacity
        if let directory, let data = try? Data(contentsOf: directory.appendingPathComponent("index.json")),
            let index = try? JSONDecoder().decode([String: IndexEntry].self, from: data)
        {
            state.withLock { state in
                state.index = index
                state.total = index.values.reduce(0) { $0 + $1.size }
            }
        }
    }

    static func key(method: HTTPRequest.Method, url: String) -> String { "\(method.rawValue) \(url)" }

    // MARK: Reading

    func entry(for key: String) -> CachedResponse? {
        guard let directory else {
            return state.withLock { state in
                guard let entry = state.memory[key] else { return nil }
                state.index[key]?.lastUse = Date()
                return entry
            }
        }
        guard let file = state.withLock({ $0.index[key]?.file }) else { return nil }
        guard let data = try? Data(contentsOf: directory.appendingPathComponent(file)),
            let entry = Self.decode(data), entry.key == key
        else {
            remove(key)  // corrupt or missing: a miss
            return nil
        }
        state.withLock { $0.index[key]?.lastUse = Date() }
        return entry
    }

    // MARK: Writing

    func store(_ entry: CachedResponse) {
        let size = Int64(entry.body.count + 512 + entry.headers.reduce(0) { $0 + $1.joined().utf8.count })
        guard size <= capacity else { return }
        let file = Self.fileName(for: entry.key)
        if let directory {
            guard let data = Self.encode(entry) else { return }
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                let temporary = directory.appendingPathComponent(".\(file).\(UUID().uuidString.prefix(8))")
                try data.write(to: temporary)
                guard rename(temporary.path, directory.appendingPathComponent(file).path) == 0 else {
                    unlink(temporary.path)
                    return
                }
            } catch {
                return
            }
        }
        let evicted = state.withLock { state -> [IndexEntry] in
            if let old = state.index[entry.key] { state.total -= old.size }
            state.index[entry.key] = IndexEntry(file: file, size: size, lastUse: Date())
            if directory == nil { state.memory[entry.key] = entry }
            state.total += size
            var evicted: [IndexEntry] = []
            while state.total > capacity,
                let oldest = state.index.min(by: { $0.value.lastUse < $1.value.lastUse })
            {
                state.index[oldest.key] = nil
                state.memory[oldest.key] = nil
                state.total -= oldest.value.size
                evicted.append(oldest.value)
            }
            return evicted
        }
        if let directory {
            for entry in evicted { unlink(directory.appendingPathComponent(entry.file).path) }
        }
        writeIndex()
    }

    func remove(_ key: String) {
        let removed = state.withLock { state -> IndexEntry? in
            guard let entry = state.index.removeValue(forKey: key) else { return nil }
            state.memory[key] = nil
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
            defer { state = State() }
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
            let temporary = directory.appendingPathComponent(".index.\(UUID().uuidString.prefix(8))")
            do {
                try data.write(to: temporary)
                if rename(temporary.path, directory.appendingPathComponent("index.json").path) != 0 {
                    unlink(temporary.path)
                }
            } catch {
                unlink(temporary.path)
            }
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

    /// A 4-byte length, the JSON record without the body, then the body.
    private static func encode(_ entry: CachedResponse) -> Data? {
        var metadata = entry
        metadata.body = Data()
        guard let json = try? JSONEncoder().encode(metadata) else { return nil }
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
            var entry = try? JSONDecoder().decode(CachedResponse.self, from: data.subdata(in: 4..<(4 + length)))
        else { return nil }
        entry.body = data.subdata(in: (4 + length)..<data.count)
        return entry
    }
}
