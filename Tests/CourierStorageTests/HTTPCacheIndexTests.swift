@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Logging
import Testing

@testable import CourierStorage

/// `HTTPCache` on disk: what its index writes per store (the snapshot and the journal), what
/// it reads back after a restart, a crash or tampering, and the order it evicts in.
@Suite struct HTTPCacheIndexTests {
    /// A directory of its own under the temporary directory, with the cache in `cache/` (so
    /// that a file beside the cache can stand for one outside it).
    final class Scratch {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("courier-cache-\(UUID().uuidString)")
        var cache: URL { root.appendingPathComponent("cache") }
        var snapshot: URL { cache.appendingPathComponent("index.json") }
        var journal: URL { cache.appendingPathComponent("index.journal") }

        deinit { try? FileManager.default.removeItem(at: root) }
    }

    static func key(_ number: Int) -> String {
        HTTPCache.key(method: .get, url: "https://api.example.com/items/\(number)")
    }

    static func entry(_ number: Int, body: String = "body") -> CachedResponse {
        CachedResponse(
            key: key(number), response: HTTPResponse(status: .ok, headerFields: [.cacheControl: "max-age=3600"]),
            body: Data(body.utf8),
            request: HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items/\(number)"),
            requestTime: Date(), responseTime: Date(), lifetimeOverride: nil)
    }

    /// What `entry(_:)` with a four-byte body takes against the capacity.
    static let entrySize = entry(0).size

    /// The body stored for `number`, if the cache has it.
    static func body(_ cache: HTTPCache, _ number: Int) -> String? {
        cache.entry(for: key(number)).map { String(decoding: $0.body, as: UTF8.self) }
    }

    /// The index as `directory`'s files give it (snapshot, then journal).
    static func index(_ directory: URL, capacity: Int64 = 1 << 30) -> [String: CacheIndexEntry] {
        CacheIndexJournal.load(from: directory, capacity: capacity, logger: nil).entries
    }

    static func append(_ text: String, to file: URL) throws {
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(text.utf8))
    }

    // MARK: What a store costs

    @Test func storingTheFourthThousandWritesAboutAsManyIndexBytesAsTheFirst() {
        let scratch = Scratch()
        let cache = HTTPCache(directory: scratch.cache, capacity: 1 << 30)
        var written: [Int64] = []
        for thousand in 0..<4 {
            let before = cache.indexBytesWritten
            for number in thousand * 1000..<(thousand + 1) * 1000 { cache.store(Self.entry(number)) }
            written.append(cache.indexBytesWritten - before)
        }
        #expect(cache.count == 4000)
        #expect(written[0] > 0)
        #expect(written[3] < 2 * written[0], "index bytes per thousand stores: \(written)")
    }

    /// A cache full at 100,000 entries (its index written as a snapshot, without their files):
    /// each store evicts the least recently used entry and journals both, at about the bytes a
    /// store costs an empty cache.
    @Test func aStoreIntoAFullCacheOfAHundredThousandEntriesWritesAboutWhatItDoesIntoAnEmptyOne() throws {
        let scratch = Scratch()
        let count = 100_000
        let start = Date()
        var entries: [String: CacheIndexEntry] = [:]
        for number in 0..<count {
            entries[Self.key(number)] = CacheIndexEntry(
                file: CacheIndexJournal.fileName(for: Self.key(number)), size: Self.entrySize,
                lastUse: start.addingTimeInterval(Double(number - count)))
        }
        try FileManager.default.createDirectory(at: scratch.cache, withIntermediateDirectories: true)
        var snapshot = CacheIndexJournal(directory: scratch.cache)
        snapshot.compact(entries)

        let full = HTTPCache(directory: scratch.cache, capacity: Int64(count) * Self.entrySize)
        #expect(full.count == count)
        let before = full.indexBytesWritten
        for number in count..<count + 100 { full.store(Self.entry(number)) }
        let intoFull = full.indexBytesWritten - before

        let emptyScratch = Scratch()
        let empty = HTTPCache(directory: emptyScratch.cache, capacity: 1 << 30)
        for number in count..<count + 100 { empty.store(Self.entry(number)) }
        let intoEmpty = empty.indexBytesWritten

        #expect(
            intoFull < 2 * intoEmpty,
            "index bytes for 100 stores: \(intoFull) into a full cache, \(intoEmpty) into an empty one")
        // The hundred least recently used went.
        #expect(full.count == count)
        #expect((0..<100).allSatisfy { full.entry(for: Self.key($0)) == nil })
        #expect(Self.body(full, count + 99) == "body")
    }

    /// The journal on its own at 100,000 entries, over enough stores to include a compaction (a
    /// snapshot of every entry): per store, about what the first thousand cost.
    @Test func theJournalsBytesPerStoreAtAHundredThousandEntriesIncludeCompactionAndStayAboutConstant() throws {
        let scratch = Scratch()
        try FileManager.default.createDirectory(at: scratch.cache, withIntermediateDirectories: true)
        var journal = CacheIndexJournal(directory: scratch.cache)
        var entries: [String: CacheIndexEntry] = [:]
        var compactions = 0
        // As `HTTPCache` does, in appends of 500 stores (the bytes are those of 500 appends of
        // one, in less time).
        func store(_ numbers: Range<Int>) {
            for first in stride(from: numbers.lowerBound, to: numbers.upperBound, by: 500) {
                let records = (first..<min(first + 500, numbers.upperBound)).map { number in
                    let entry = CacheIndexEntry(
                        file: CacheIndexJournal.fileName(for: Self.key(number)), size: Self.entrySize, lastUse: Date())
                    entries[Self.key(number)] = entry
                    return CacheIndexRecord.store(Self.key(number), entry)
                }
                if journal.shouldCompact(entries: entries.count, adding: records.count) {
                    journal.compact(entries)
                    compactions += 1
                } else {
                    journal.append(records)
                }
            }
        }
        store(0..<1000)
        let firstThousand = journal.bytesWritten
        store(1000..<100_000)
        let filled = journal.bytesWritten
        store(0..<100_000)  // every entry again: the journal outgrows the index once
        let perThousand = (journal.bytesWritten - filled) / 100
        #expect(compactions == 1)
        #expect(
            perThousand < 2 * firstThousand,
            "bytes per thousand stores: \(firstThousand) at first, \(perThousand) at 100,000")
    }

    // MARK: Reading back

    @Test func aReopenedCacheHasTheEntriesStoredAndNotThoseRemoved() {
        let scratch = Scratch()
        let cache = HTTPCache(directory: scratch.cache, capacity: 1 << 20)
        for number in 0..<20 { cache.store(Self.entry(number)) }
        for number in [3, 7, 11] { cache.remove(Self.key(number)) }
        for number in [4, 8] { cache.store(Self.entry(number, body: "replaced \(number)")) }
        cache.store(Self.entry(3, body: "back"))

        let reopened = HTTPCache(directory: scratch.cache, capacity: 1 << 20)
        #expect(reopened.count == 18)
        #expect(reopened.totalSize == cache.totalSize)
        for number in 0..<20 {
            #expect(Self.body(reopened, number) == Self.body(cache, number), "entry \(number)")
        }
        #expect(Self.body(reopened, 3) == "back")
        #expect(Self.body(reopened, 7) == nil)
        #expect(Self.body(reopened, 8) == "replaced 8")
    }

    /// A crash after compaction wrote the snapshot and before it emptied the journal: the
    /// journal is replayed over a snapshot that already has it, and changes nothing (not even
    /// a last use the snapshot has and the journal does not).
    @Test func replayingAJournalOverTheSnapshotItWasCompactedIntoChangesNothing() throws {
        let scratch = Scratch()
        let cache = HTTPCache(directory: scratch.cache, capacity: 1 << 20)
        for number in 0..<5 { cache.store(Self.entry(number)) }
        cache.remove(Self.key(2))
        _ = cache.entry(for: Self.key(3))
        cache.store(Self.entry(1, body: "longer than before"))  // journals the use of 3 first
        cache.store(Self.entry(2, body: "back"))
        cache.remove(Self.key(0))
        let journal = try Data(contentsOf: scratch.journal)
        // The snapshot a compaction writes: the index now, with a use of 4 that no line has
        // yet (uses go with the next change), then the journal emptied.
        var compacted = Self.index(scratch.cache)
        #expect(compacted.keys.sorted() == [1, 2, 3, 4].map(Self.key))
        compacted[Self.key(4)]?.lastUse = Date().addingTimeInterval(1)
        var compaction = CacheIndexJournal(directory: scratch.cache)
        compaction.compact(compacted)
        #expect(try Data(contentsOf: scratch.journal).isEmpty)
        #expect(Self.index(scratch.cache) == compacted)

        try journal.write(to: scratch.journal)  // the crash: the journal as it was
        #expect(Self.index(scratch.cache) == compacted)
        let reopened = HTTPCache(directory: scratch.cache, capacity: 1 << 20)
        #expect(reopened.count == 4)
        #expect(Self.body(reopened, 1) == "longer than before")
        #expect(Self.body(reopened, 2) == "back")
        #expect(Self.body(reopened, 0) == nil)
    }

    @Test func anUnfinishedLastJournalLineIsIgnoredAndTheNextStoreIsNotLost() throws {
        let scratch = Scratch()
        let cache = HTTPCache(directory: scratch.cache, capacity: 1 << 20)
        for number in 0..<3 { cache.store(Self.entry(number)) }
        // A power loss cut the next append short: half of entry 7's record, without its newline.
        let record = CacheIndexJSON.lines([
            .store(
                Self.key(7),
                CacheIndexEntry(file: CacheIndexJournal.fileName(for: Self.key(7)), size: 600, lastUse: Date()))
        ])
        try Self.append(String(decoding: record.prefix(record.count / 2), as: UTF8.self), to: scratch.journal)

        let recorder = LogRecorder()
        let reopened = HTTPCache(directory: scratch.cache, capacity: 1 << 20, logger: recorder.logger)
        #expect(reopened.count == 3)
        #expect(Self.index(scratch.cache)[Self.key(7)] == nil)
        #expect(recorder.messages.contains { $0.contains("unfinished last line") }, "\(recorder.messages)")
        reopened.store(Self.entry(3))
        let again = HTTPCache(directory: scratch.cache, capacity: 1 << 20)
        #expect(again.count == 4)
        #expect(Self.body(again, 3) == "body")
    }

    @Test func aJournalLineThatCannotBeDecodedIsSkippedAndTheOthersKept() throws {
        let scratch = Scratch()
        let cache = HTTPCache(directory: scratch.cache, capacity: 1 << 20)
        cache.store(Self.entry(0))
        try Self.append("\u{0}\u{0}\u{0}\u{0}\n{\"op\":\"evict\",\"key\":\"x\"}\n", to: scratch.journal)
        cache.store(Self.entry(1))
        let recorder = LogRecorder()
        let reopened = HTTPCache(directory: scratch.cache, capacity: 1 << 20, logger: recorder.logger)
        #expect(reopened.count == 2)
        #expect(recorder.messages.contains { $0.contains("Skipped 2 cache journal lines") }, "\(recorder.messages)")
    }

    /// Journal records naming a file that is not the one the cache writes for their key (one
    /// outside the cache, another entry's) or an absurd size: dropped and logged, and the files
    /// they name are neither read nor removed.
    @Test func aJournalRecordNamingAnotherFileIsDroppedAndTheFileLeftAlone() throws {
        let scratch = Scratch()
        let cache = HTTPCache(directory: scratch.cache, capacity: 1 << 20)
        cache.store(Self.entry(1, body: "precious entry"))
        let victim = scratch.root.appendingPathComponent("victim.txt")
        try Data("precious".utf8).write(to: victim)
        let lastUse = Date().timeIntervalSinceReferenceDate
        let hostile: [(key: String, file: String, size: Int64)] = [
            ("GET https://evil.example/outside", "../victim.txt", 8),
            ("GET https://evil.example/absolute", victim.path, 8),
            ("GET https://evil.example/another", CacheIndexJournal.fileName(for: Self.key(1)), 8),
            (Self.key(5), CacheIndexJournal.fileName(for: Self.key(5)), Int64.max),
        ]
        for record in hostile {
            let line = try JSONSerialization.data(withJSONObject: [
                "op": "store", "key": record.key, "file": record.file, "size": record.size, "lastUse": lastUse,
            ])
            try Self.append(String(decoding: line, as: UTF8.self) + "\n", to: scratch.journal)
        }

        let recorder = LogRecorder()
        let reopened = HTTPCache(directory: scratch.cache, capacity: 1 << 20, logger: recorder.logger)
        #expect(reopened.count == 1)
        #expect(reopened.totalSize == Self.entry(1, body: "precious entry").size)
        for record in hostile { #expect(reopened.entry(for: record.key) == nil) }
        #expect(try Data(contentsOf: victim) == Data("precious".utf8))
        #expect(Self.body(reopened, 1) == "precious entry")
        let dropped = recorder.messages.filter { $0.contains("Dropped the cache journal record") }
        #expect(dropped.count == hostile.count, "\(recorder.messages)")
    }

    /// A cache directory as the cache wrote it before it kept a journal: `index.json` alone,
    /// whose last uses order the eviction.
    @Test func aCacheWithASnapshotAloneOpensAndEvictsByItsLastUses() throws {
        let scratch = Scratch()
        let writer = HTTPCache(directory: scratch.cache, capacity: 1 << 20)
        for number in 0..<3 { writer.store(Self.entry(number)) }
        try FileManager.default.removeItem(at: scratch.journal)
        let now = Date().timeIntervalSinceReferenceDate
        // Entry 1 the least recently used, then 0, then 2.
        let lastUses = [0: now - 20, 1: now - 30, 2: now - 10]
        var index: [String: Any] = [:]
        for (number, lastUse) in lastUses {
            index[Self.key(number)] = [
                "file": CacheIndexJournal.fileName(for: Self.key(number)), "size": Self.entrySize, "lastUse": lastUse,
            ]
        }
        try JSONSerialization.data(withJSONObject: index).write(to: scratch.snapshot)

        let reopened = HTTPCache(directory: scratch.cache, capacity: 3 * Self.entrySize)
        #expect(reopened.count == 3)
        #expect(reopened.totalSize == 3 * Self.entrySize)
        reopened.store(Self.entry(3))
        #expect(reopened.count == 3)
        #expect(Self.body(reopened, 1) == nil)
        #expect(Self.body(reopened, 0) == "body")
        #expect(Self.body(reopened, 2) == "body")
        #expect(
            !FileManager.default.fileExists(
                atPath: scratch.cache.appendingPathComponent(CacheIndexJournal.fileName(for: Self.key(1))).path))
    }

    @Test func removeAllEmptiesTheSnapshotTheJournalAndTheEntryFiles() throws {
        let scratch = Scratch()
        let writer = HTTPCache(directory: scratch.cache, capacity: 1 << 20)
        for number in 0..<3 { writer.store(Self.entry(number)) }
        var compaction = CacheIndexJournal(directory: scratch.cache)
        compaction.compact(Self.index(scratch.cache))  // entries in the snapshot, and in the journal:
        let cache = HTTPCache(directory: scratch.cache, capacity: 1 << 20)
        for number in 3..<6 { cache.store(Self.entry(number)) }
        #expect(try Data(contentsOf: scratch.snapshot).count > 2)
        #expect(try Data(contentsOf: scratch.journal).count > 0)
        cache.removeAll()
        #expect(cache.count == 0)
        let snapshot = try JSONSerialization.jsonObject(with: Data(contentsOf: scratch.snapshot)) as? [String: Any]
        #expect(snapshot?.isEmpty == true)
        #expect(try Data(contentsOf: scratch.journal).isEmpty)
        let files = try FileManager.default.contentsOfDirectory(atPath: scratch.cache.path)
        #expect(files.filter { $0.hasSuffix(".response") } == [])
        #expect(HTTPCache(directory: scratch.cache, capacity: 1 << 20).count == 0)
    }

    // MARK: Eviction

    @Test func theLeastRecentlyUsedEntryGoesFirstAndTheOrderSurvivesAReopen() {
        let scratch = Scratch()
        do {
            let cache = HTTPCache(directory: scratch.cache, capacity: 3 * Self.entrySize)
            for number in 1...3 { cache.store(Self.entry(number)) }
            _ = cache.entry(for: Self.key(1))
            cache.store(Self.entry(4))  // 2 is the least recently used
            #expect(Self.index(scratch.cache).keys.sorted() == [1, 3, 4].map(Self.key))
            _ = cache.entry(for: Self.key(3))
            cache.store(Self.entry(5))  // then 1
            #expect(Self.index(scratch.cache).keys.sorted() == [3, 4, 5].map(Self.key))
            _ = cache.entry(for: Self.key(4))  // journaled when the cache goes
        }
        // From the least recently used: 3, 5, 4.
        let reopened = HTTPCache(directory: scratch.cache, capacity: 3 * Self.entrySize)
        reopened.store(Self.entry(6))
        #expect(Self.index(scratch.cache).keys.sorted() == [4, 5, 6].map(Self.key))
        reopened.store(Self.entry(7))
        #expect(Self.index(scratch.cache).keys.sorted() == [4, 6, 7].map(Self.key))
    }

    /// The entries a disk cache keeps decoded: the most recently used within its memory limit.
    /// With the files gone behind its back, those still answer and the others are misses.
    @Test func memoryKeepsTheMostRecentlyUsedEntries() throws {
        let scratch = Scratch()
        let cache = HTTPCache(directory: scratch.cache, capacity: 1 << 20, memoryCapacity: 2 * Self.entrySize)
        for number in 1...3 { cache.store(Self.entry(number)) }  // memory: 2, 3
        _ = cache.entry(for: Self.key(2))  // memory: 3, 2
        cache.store(Self.entry(4))  // memory: 2, 4
        for file in try FileManager.default.contentsOfDirectory(atPath: scratch.cache.path)
        where file.hasSuffix(".response") {
            try FileManager.default.removeItem(at: scratch.cache.appendingPathComponent(file))
        }
        #expect(Self.body(cache, 2) == "body")
        #expect(Self.body(cache, 4) == "body")
        #expect(Self.body(cache, 1) == nil)
        #expect(Self.body(cache, 3) == nil)
        #expect(cache.count == 2)
    }
}

/// Keeps what a `Logger` made with `logger` logs.
final class LogRecorder: Sendable {
    private let recorded = Locked<[String]>([])

    var messages: [String] { recorded.withLock { $0 } }

    var logger: Logger { Logger(label: "courier-storage-tests") { _ in Handler(recorder: self) } }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            recorder.recorded.withLock { $0.append("\(event.message)") }
        }
    }
}
