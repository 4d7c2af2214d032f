import Courier
import Foundation
import Testing

/// The release's facts agree with each other: the version the library reports (and sends in
/// `User-Agent`) is the latest release CHANGELOG.md lists, which is the tag it is released as.
@Suite struct ReleaseTests {
    static let root = TestServers.repositoryRoot

    @Test func theLibrarysVersionIsTheChangelogsLatestRelease() throws {
        let changelog = try String(contentsOf: Self.root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let releases = changelog.split(separator: "\n").filter {
            $0.hasPrefix("## [") && !$0.hasPrefix("## [Unreleased]")
        }
        let latest = try #require(releases.first)
        #expect(latest.hasPrefix("## [\(CourierInfo.version)] - "), "\(latest)")
        #expect(changelog.contains("## [Unreleased]"))
    }

    @Test func theVersionIsSemantic() {
        let parts = CourierInfo.version.split(separator: ".")
        #expect(parts.count == 3 && parts.allSatisfy { Int($0) != nil }, "\(CourierInfo.version)")
    }

    @Test func theLicenseAndNoticeAreThere() throws {
        let license = try String(contentsOf: Self.root.appendingPathComponent("LICENSE"), encoding: .utf8)
        #expect(license.contains("Apache License\n                           Version 2.0, January 2004"))
        let notice = try String(contentsOf: Self.root.appendingPathComponent("NOTICE"), encoding: .utf8)
        #expect(notice.contains("Conformance/cache-tests/LICENSE"))
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        #expect(manifest.contains("SPDX-License-Identifier: Apache-2.0"))
    }

    /// The public enums whose cases are all their meaning allows: a `switch` over them may
    /// name every case, and a new case is a breaking change, for a major release (README.md,
    /// "Versions and what they promise"). Every other public enum with cases is open: its
    /// documentation says "Minor releases may add cases".
    static let closedEnums: Set<String> = [
        "JSON", "WebSocketMessage", "Reachability", "RetryDecision", "RequestPriority", "BackgroundTask",
        "SessionTask.State", "SessionEvent.Outcome", "HTTPSessionConfiguration.Kind", "Credential.Persistence",
    ]

    /// Each public enum with cases declared in `Sources`, by its name qualified with the type
    /// it is nested in, and whether its doc comment says that minor releases may add cases.
    static func publicEnums() throws -> [(name: String, open: Bool)] {
        let sources = root.appendingPathComponent("Sources")
        let declaration = #/^(\s*)(?:public|open)\s+(?:indirect\s+)?enum\s+(\w+)/#
        let container =
            #/^(\s*)(?:(?:public|open|package|final|private|fileprivate|internal)\s+)*(?:struct|class|enum|actor|extension)\s+(\w+)/#
        var found: [(name: String, open: Bool)] = []
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            guard file.pathExtension == "swift" else { continue }
            let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
            for (index, line) in lines.enumerated() {
                guard let match = line.firstMatch(of: declaration) else { continue }
                let indent = String(match.1)
                // Qualified with the nearest type declared less indented above it.
                var name = String(match.2)
                if !indent.isEmpty {
                    for outer in lines[..<index].reversed() {
                        if let enclosing = outer.firstMatch(of: container), enclosing.1.count < indent.count {
                            name = "\(enclosing.2).\(name)"
                            break
                        }
                    }
                }
                // Its body, to its closing brace at the same indentation: a namespace has no cases.
                let body = lines[(index + 1)...].prefix { !$0.hasPrefix(indent + "}") }
                guard body.contains(where: { $0.hasPrefix(indent + "    case ") }) else { continue }
                let comment = lines[..<index].reversed().prefix {
                    $0.trimmingCharacters(in: .whitespaces).hasPrefix("///")
                }
                found.append((name, comment.contains { $0.contains("Minor releases may add cases") }))
            }
        }
        return found
    }

    @Test func everyPublicEnumIsDocumentedAsOpenOrListedAsClosed() throws {
        let enums = try Self.publicEnums()
        let names = Set(enums.map(\.name))
        // The reading found the enums it should (of both kinds).
        #expect(
            names.isSuperset(of: ["CourierError", "RequestEvent.Kind", "SessionTask.Kind", "JSON", "SessionTask.State"])
        )
        for item in enums {
            let closed = Self.closedEnums.contains(item.name)
            #expect(
                item.open != closed,
                "\(item.name): \(closed ? "listed as closed but documented as open" : "neither documented as open (\"Minor releases may add cases: a `switch` over it ends with `default`.\") nor listed as closed")"
            )
        }
        #expect(
            Self.closedEnums.subtracting(names).isEmpty,
            "closed enums that no longer exist: \(Self.closedEnums.subtracting(names))")
    }
}
