import Foundation
import Testing

@testable import CourierStorage

/// The cache index's JSON, written by hand and read back with `JSONDecoder`: whatever a key
/// holds, it reads back the same.
@Suite struct CacheIndexJSONTests {
    static let awkwardKeys = [
        "GET https://api.example.com/plain",
        #"GET https://api.example.com/"quoted"\back\slash"#,
        "GET https://api.example.com/line\nbreak\r\ttab\u{0}nul\u{1f}",
        "GET https://api.example.com/caf\u{e9}/\u{1F600}/\u{7f}",
        "",
    ]

    static func entry(_ key: String, lastUse: Date = Date()) -> CacheIndexEntry {
        CacheIndexEntry(file: CacheIndexJournal.fileName(for: key), size: Int64(key.utf8.count), lastUse: lastUse)
    }

    @Test func journalLinesReadBackAsTheRecordsTheyWereWrittenFrom() throws {
        let dates = [
            Date(), Date(timeIntervalSinceReferenceDate: 0), Date(timeIntervalSinceReferenceDate: -1e9 - 0.125),
        ]
        var records: [CacheIndexRecord] = []
        for (index, key) in Self.awkwardKeys.enumerated() {
            records.append(.store(key, Self.entry(key, lastUse: dates[index % dates.count])))
            records.append(.remove(key))
            records.append(.use(key, at: dates[(index + 1) % dates.count]))
        }
        let text = CacheIndexJSON.lines(records)
        let lines = text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        #expect(lines.count == records.count + 1)
        #expect(lines.last?.isEmpty == true)
        let decoded = try lines.dropLast().map { try JSONDecoder().decode(CacheIndexRecord.self, from: Data($0)) }
        #expect(decoded == records)
    }

    @Test func theSnapshotReadsBackAsTheEntriesItWasWrittenFrom() throws {
        var entries: [String: CacheIndexEntry] = [:]
        for key in Self.awkwardKeys { entries[key] = Self.entry(key) }
        let text = CacheIndexJSON.snapshot(entries)
        #expect(try JSONDecoder().decode([String: CacheIndexEntry].self, from: Data(text)) == entries)
        #expect(
            try JSONDecoder().decode([String: CacheIndexEntry].self, from: Data(CacheIndexJSON.snapshot([:]))) == [:])
    }
}
