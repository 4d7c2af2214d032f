import Foundation
import Testing

@testable import CourierJSON

/// The tape decoder must give `JSONDecoder`'s answer or none (the serializer then asks
/// `JSONDecoder`). Every test here decodes the same text both ways: when the tape decoder
/// answers, its value must equal `JSONDecoder`'s, and it must not answer where `JSONDecoder`
/// throws. Where it should be used (ordinary API objects), the tests also require that it
/// answers.
struct TapeDecoderTests {
    /// Decodes `text` both ways and checks the rule above; returns the tape decoder's answer.
    @discardableResult
    private func compare<T: Decodable & Equatable>(
        _ type: T.Type, _ text: String, answers: Bool? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) -> T? {
        compare(type, Data(text.utf8), answers: answers, sourceLocation: sourceLocation)
    }

    @discardableResult
    private func compare<T: Decodable & Equatable>(
        _ type: T.Type, _ data: Data, answers: Bool? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) -> T? {
        let decoder = JSONDecoder()
        let expected = try? decoder.decode(T.self, from: data)
        var fast: T?
        do {
            fast = try TapeDecoding.decode(T.self, from: data, like: decoder)
        } catch {
            Issue.record("refused: \(error)", sourceLocation: sourceLocation)
        }
        if let fast {
            #expect(fast == expected, "\(String(decoding: data, as: UTF8.self))", sourceLocation: sourceLocation)
        }
        if let answers {
            #expect(
                (fast != nil) == answers, "\(String(decoding: data, as: UTF8.self))", sourceLocation: sourceLocation)
        }
        return fast
    }

    struct Everything: Codable, Equatable {
        var int: Int
        var int8: Int8
        var int16: Int16
        var int32: Int32
        var int64: Int64
        var uint: UInt
        var uint8: UInt8
        var uint16: UInt16
        var uint32: UInt32
        var uint64: UInt64
        var double: Double
        var bool: Bool
        var string: String
        var optional: String?
        var missing: Int?
        var list: [Int]
        var nested: [[String]]
        var map: [String: Double]
        var numbered: [Int: String]
        var set: Set<String>
        var kind: Kind
        var level: Level
        var json: JSON

        enum Kind: String, Codable { case small, large }
        enum Level: Int, Codable { case low = 1, high = 2 }
    }

    @Test func anOrdinaryObjectIsDecodedFastAndAlike() throws {
        let text = """
            {"int": -42, "int8": -128, "int16": 32767, "int32": -5, "int64": 9223372036854775807,
             "uint": 0, "uint8": 255, "uint16": 65535, "uint32": 4294967295, "uint64": 18446744073709551615,
             "double": -12.5e-3, "bool": true, "string": "caf\\u00e9 \\"q\\" \\\\ \\/ \\n\\t 😀 \\ud83d\\ude00",
             "optional": null, "list": [1, 2, 3], "nested": [[], ["a"], ["b", "c"]],
             "map": {"x": 1, "y": 2.5}, "numbered": {"1": "one", "20": "twenty"}, "set": ["a", "b", "a"],
             "kind": "large", "level": 2, "json": {"a": [1, "b", null, true, {"c": false}]}}
            """
        let value = try #require(compare(Everything.self, text, answers: true))
        #expect(value.string == "café \"q\" \\ / \n\t 😀 😀")
        #expect(value.numbered == [1: "one", 20: "twenty"])
    }

    struct Pair: Codable, Equatable {
        var a: Int
        var b: String
    }

    @Test(arguments: [
        #"{"a": 1, "b": "x"}"#, #"{"b": "x", "a": 1}"#, #"  {"a":1,"b":"x"}  "#, #"{"a": -0, "b": ""}"#,
        #"{"a": 1, "b": "x", "a": 2, "b": "y"}"#,  // the first of each name, as JSONDecoder
        #"{"\u0061": 1, "b": "x"}"#,  // an escaped key
        #"{"a": 1, "b": "x", "extra": {"deep": [[[{}]]]}}"#,
    ])
    func objectsAnswer(text: String) {
        compare(Pair.self, text, answers: true)
    }

    @Test(arguments: [
        #"{"a": 1}"#, #"{"a": "1", "b": "x"}"#, #"{"a": 1.5, "b": "x"}"#, #"{"a": null, "b": "x"}"#,
        #"{"a": 9223372036854775808, "b": "x"}"#, #"{"a": 1, "b": 2}"#, #"[1, "x"]"#, #"null"#, #""x""#,
        #"{"a": 1, "b": "x",}"#, #"{"a": 1 "b": "x"}"#, "\u{FEFF}{\"a\": 1, \"b\": \"x\"}", #"{"a": 01, "b": "x"}"#,
        #"{"a": 1, "b": "\ud800"}"#, #"{"a": 1, "b": "\udc00x"}"#, "{\"a\": 1, \"b\": \"tab\there\"}",
        #"{"a": 1, "b": "x"} x"#, #"{"a": 1, "b": "x"/* c */}"#, #"{'a': 1, "b": "x"}"#, "",
    ])
    func errorsAndLenientTextAreLeftToJSONDecoder(text: String) {
        compare(Pair.self, text, answers: false)
    }

    @Test func invalidUTF8IsLeftToJSONDecoder() {
        compare(String.self, Data([0x22, 0xFF, 0x22]), answers: false)
        compare(String.self, Data([0x22, 0xED, 0xA0, 0x80, 0x22]), answers: false)  // an encoded surrogate
        compare(String.self, Data([0x22, 0xC3, 0xA9, 0x22]), answers: true)
        compare(String.self, Data("\"\u{7F}\u{10FFFF}\"".utf8), answers: true)
    }

    @Test(arguments: [
        ("0", true), ("-0", true), ("1e2", true), ("1E+2", true), ("-12.5e-3", true), ("0.1", true),
        ("123456789012345678901234567890", true), ("5e-324", false), ("1e-400", false), ("1e400", false),
        ("0e-400", false), ("0e8", false), ("-0.0", true), ("1.", false), (".5", false), ("+1", false), ("--1", false),
        ("NaN", false), ("1e", false),
    ])
    func doubles(text: String, answers: Bool) {
        compare(Double.self, text, answers: answers)
        compare([Double].self, "[\(text)]", answers: answers)
    }

    @Test(arguments: [
        ("127", true), ("-128", true), ("128", false), ("-129", false), ("1.0", false), ("1e2", false),
        ("\"1\"", false), ("true", false), ("null", false),
    ])
    func integersInRangeAnswerAndTheRestIsJSONDecoders(text: String, answers: Bool) {
        compare(Int8.self, text, answers: answers)
        compare(Int8?.self, text, answers: answers || text == "null")
    }

    @Test func unsignedIntegersRefuseNegativesAndOverflow() {
        compare(UInt8.self, "255", answers: true)
        compare(UInt8.self, "256", answers: false)
        compare(UInt8.self, "-1", answers: false)
        compare(UInt64.self, "18446744073709551616", answers: false)
        compare(UInt.self, "-0", answers: false)  // JSONDecoder's call
    }

    @Test func typesJSONDecoderTreatsSpeciallyAreLeftToIt() {
        struct Special: Codable, Equatable {
            var date: Date?
            var data: Data?
            var url: URL?
            var decimal: Decimal?
            var float: Float?
        }
        compare(Special.self, #"{"date": 1}"#, answers: false)
        compare(Special.self, #"{"data": "AQI="}"#, answers: false)
        compare(Special.self, #"{"url": "https://example.com/a b"}"#, answers: false)
        compare(Special.self, #"{"decimal": 1.25}"#, answers: false)
        compare(Special.self, #"{"float": 0.1}"#, answers: false)
        compare(Special.self, #"{}"#, answers: true)  // none present: nothing special decoded
    }

    /// `init(from:)` code that tries one type, catches the error and tries another: a tape
    /// answer it could not vouch for, even swallowed by `try?`, must not leak into the result.
    struct Flexible: Decodable, Equatable {
        var value: String

        init(value: String) { self.value = value }

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let int = try? container.decode(Int.self) {
                value = "int \(int)"
            } else if let double = try? container.decode(Double.self) {
                value = "double \(double)"
            } else {
                value = "string \(try container.decode(String.self))"
            }
        }
    }

    @Test func answersThatTryDiscardsDoNotLeak() {
        #expect(compare(Flexible.self, "3", answers: true) == Flexible(value: "int 3"))
        compare(Flexible.self, "3.0", answers: false)  // JSONDecoder reads 3.0 as an Int: its answer
        #expect(compare(Flexible.self, "3.5", answers: false) == nil)
        #expect(compare(Flexible.self, #""x""#, answers: true) == Flexible(value: "string x"))
        compare(JSON.self, #"{"a": [1, 2.5]}"#, answers: false)
        compare(JSON.self, #"{"a": [1, "2", null, {"b": true}]}"#, answers: true)
    }

    /// Containers used by hand, as a custom `init(from:)` would.
    struct Manual: Decodable, Equatable {
        var values: [Int?]
        var count: Int?
        var inner: String
        var present: Bool
        var error: String

        enum Keys: String, CodingKey { case values, inner, box, absent }
        enum Inner: String, CodingKey { case text }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Keys.self)
            var list = try container.nestedUnkeyedContainer(forKey: .values)
            count = list.count
            var values: [Int?] = []
            while !list.isAtEnd { values.append(try list.decodeNil() ? nil : try list.decode(Int.self)) }
            self.values = values
            do {
                _ = try list.decode(Int.self)
                error = "none"
            } catch DecodingError.valueNotFound {
                error = "at end"
            }
            inner = try container.nestedContainer(keyedBy: Inner.self, forKey: .box).decode(String.self, forKey: .text)
            present = container.contains(.absent)
        }
    }

    @Test func containersUsedByHand() {
        let value = compare(Manual.self, #"{"values": [1, null, 3], "box": {"text": "t"}}"#, answers: true)
        #expect(value?.values == [1, nil, 3])
        #expect(value?.error == "at end")
        compare(Manual.self, #"{"values": [1, null, 3], "box": null}"#, answers: false)
        compare(Manual.self, #"{"values": {}, "box": {"text": "t"}}"#, answers: false)
    }

    @Test func largeObjectsAndDictionariesUseTheFirstOccurrence() {
        var members = (0..<40).map { "\"k\($0)\": \($0)" }
        members.append("\"k3\": 300")
        let text = "{" + members.joined(separator: ", ") + "}"
        let value = compare([String: Int].self, text, answers: true)
        #expect(value?["k3"] == 3)
        #expect(value?.count == 40)
        struct Wide: Decodable, Equatable {
            var k0: Int
            var k39: Int
            var k3: Int
        }
        #expect(
            compare(Wide.self, text, answers: true) == (try? JSONDecoder().decode(Wide.self, from: Data(text.utf8))))
    }

    @Test func nestingPastTheLimitIsRefusedAsJSONParsingRefusesIt() throws {
        let shallow = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        compare(JSON.self, shallow, answers: true)
        let limit = JSON.maximumNestingDepth
        #expect(limit == 512)
        let deepest = String(repeating: "[", count: limit) + String(repeating: "]", count: limit)
        compare(JSON.self, deepest, answers: true)
        // One level more: the tape refuses it with JSON(parsing:)'s error instead of leaving it
        // to JSONDecoder (which refuses it too, with its own limit of 512).
        let deep = Data((String(repeating: "[", count: limit + 1) + String(repeating: "]", count: limit + 1)).utf8)
        let expected = JSONParsingError(offset: limit, reason: "nesting deeper than 512")
        #expect(throws: expected) { try TapeDecoding.decode(JSON.self, from: deep, like: JSONDecoder()) }
        #expect(throws: expected) { try JSON(parsing: deep) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(JSON.self, from: deep) }
        // Inside an object, at the first bracket past the limit.
        let wrapped = Data(#"{"a": "#.utf8) + deep + Data("}".utf8)
        #expect(throws: JSONParsingError(offset: 6 + limit - 1, reason: "nesting deeper than 512")) {
            try TapeDecoding.decode([String: JSON].self, from: wrapped, like: JSONDecoder())
        }
    }

    @Test func aDecoderWithOtherStrategiesIsLeftAlone() throws {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        #expect(try TapeDecoding.decode(Pair.self, from: Data(#"{"a": 1, "b": "x"}"#.utf8), like: decoder) == nil)
        let lenient = JSONDecoder()
        lenient.allowsJSON5 = true
        #expect(try TapeDecoding.decode(Pair.self, from: Data(#"{"a": 1, "b": "x"}"#.utf8), like: lenient) == nil)
    }

    @Test func userInfoAndCodingPathReachInitFromDecoder() throws {
        struct Probe: Decodable, Equatable {
            var info: String
            var path: String

            init(from decoder: any Decoder) throws {
                info = decoder.userInfo[CodingUserInfoKey(rawValue: "tag")!] as? String ?? "none"
                path = decoder.codingPath.map(\.stringValue).joined(separator: "/")
            }
        }
        struct Outer: Decodable, Equatable { var list: [Probe] }
        let decoder = JSONDecoder()
        decoder.userInfo[CodingUserInfoKey(rawValue: "tag")!] = "hello"
        let data = Data(#"{"list": [{}, {}]}"#.utf8)
        let fast = try #require(try TapeDecoding.decode(Outer.self, from: data, like: decoder))
        #expect(fast == (try decoder.decode(Outer.self, from: data)))
        #expect(fast.list.map(\.path) == ["list/Index 0", "list/Index 1"])
        #expect(fast.list.first?.info == "hello")
    }

    /// Random documents decoded as `JSON`, whose `init(from:)` tries each kind in turn: the
    /// broadest check of answering alike.
    @Test func randomDocumentsDecodeAlike() {
        var generator = SplitMix(seed: 0x5EED)
        var answered = 0
        for _ in 0..<400 {
            let text = Self.randomValue(&generator, depth: 0)
            if compare(JSON.self, text) != nil { answered += 1 }
            compare([String: JSON].self, text)
            compare([JSON].self, text)
        }
        #expect(answered > 100)  // the integer-only documents, at least
    }

    private static func randomValue(_ generator: inout SplitMix, depth: Int) -> String {
        let choice = depth > 3 ? generator.next(6) : generator.next(9)
        switch choice {
        case 0: return "null"
        case 1: return generator.next(2) == 0 ? "true" : "false"
        case 2: return String(Int(generator.next(2_000_000)) - 1_000_000)
        case 3:
            return ["0", "-0", "7", "120", "-3", "2.5", "1e3", "-0.25e-2", "1.0", "99999999999999999999"][
                generator.next(10)]
        case 4, 5:
            let pieces = ["a", "é", "\\n", "\\\"", "\\u0041", "\\ud83d\\ude00", " ", "\\\\", "z9", "😀"]
            return "\"" + (0..<generator.next(5)).map { _ in pieces[generator.next(pieces.count)] }.joined() + "\""
        case 6:
            let elements = (0..<generator.next(4)).map { _ in randomValue(&generator, depth: depth + 1) }
            return "[" + elements.joined(separator: ",") + "]"
        default:
            let keys = ["a", "b", "id", "name", "a"]  // "a" twice: duplicate keys happen
            let members = (0..<generator.next(5)).map { _ in
                "\"\(keys[generator.next(keys.count)])\": " + randomValue(&generator, depth: depth + 1)
            }
            return "{" + members.joined(separator: ", ") + "}"
        }
    }
}

/// A small deterministic random number generator for the tests.
struct SplitMix {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(bound))
    }
}
