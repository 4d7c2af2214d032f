// bench-json: `JSON(parsing:)` alone, without the network: the time of one parse of a 348-byte
// object and of an 87 KB array of 250 of them, the best of five rounds, every value checked.
//
//   swift run -c release --package-path Benchmarks bench-json
//
// For a before-and-after figure, build the same file against the other commit (a package whose
// one dependency is that checkout by path) and run both in turn.
import Courier
import Foundation

let item =
    #"{"id": 12345, "name": "Ada Lovelace", "email": "ada@example.com", "active": true, "score": 98.25, "#
    + #""tags": ["math", "engines", "poetry"], "address": {"street": "12 St James's Square", "#
    + #""city": "London", "zip": "SW1Y 4JH"}, "notes": null, "bio": "Wrote the first published "#
    + #"algorithm intended for a machine, with notes on the Analytical Engine.\u00e9"}"#
let small = Data(item.utf8)
let large = Data(("[" + Array(repeating: item, count: 250).joined(separator: ",") + "]").utf8)

/// The best of five rounds of `count` parses of `data`, each checked.
func measure(_ name: String, _ data: Data, count: Int, expecting check: (JSON) -> Bool) throws {
    let clock = ContinuousClock()
    var best = Duration.seconds(1_000)
    for _ in 0..<5 {
        let elapsed = try clock.measure {
            for _ in 0..<count {
                let value = try JSON(parsing: data)
                guard check(value) else { fatalError("\(name): the parse read something else") }
            }
        }
        best = min(best, elapsed)
    }
    let nanoseconds = Double(best.components.attoseconds) / 1e9 + Double(best.components.seconds) * 1e9
    print("RESULT document=\(name) bytes=\(data.count) ns_per_parse=\(Int(nanoseconds / Double(count)))")
}

try measure("object", small, count: 100_000) { $0["address"]["city"].stringValue == "London" }
try measure("array", large, count: 500) { $0[249]["tags"][2].stringValue == "poetry" }
