import CourierJSON
import Foundation
import Testing

@Suite struct JSONTests {
    @Test func literalsMixTypes() {
        let json: JSON = ["page": 2, "ratio": 0.5, "tags": ["a", "b"], "draft": false, "none": nil]
        #expect(json["page"].intValue == 2)
        #expect(json["ratio"].doubleValue == 0.5)
        #expect(json["tags"][1] == "b")
        #expect(json["draft"].boolValue == false)
        #expect(json["none"].isNull)
        #expect(json["missing"]["deeper"] == nil)
    }

    @Test func parsesEveryKindOfValue() throws {
        let text =
            #"{"a":[1,-2.5e3,true,false,null],"b":{"c":"d"},"e":"\u00e9\ud83d\ude80\n\"","big":12345678901234567890}"#
        let json = try JSON(parsing: text)
        #expect(json["a"] == [1, -2500.0, true, false, nil])
        #expect(json["b"]["c"] == "d")
        #expect(json["e"] == "é🚀\n\"")
        #expect(json["big"].doubleValue == 12345678901234567890.0)
    }

    /// Each refusal names the byte where parsing stopped and why.
    @Test(arguments: [
        ("", 0, "unexpected end of input"), ("{", 1, "expected a key"), ("[1,]", 3, "unexpected character"),
        ("{\"a\" 1}", 5, "expected ':'"), ("01", 1, "unexpected text after the value"), ("1.", 2, "invalid number"),
        ("tru", 0, "unexpected end of input"), ("trux", 0, "invalid literal"),
        ("\"\u{01}\"", 1, "control character in string"), ("[1] x", 4, "unexpected text after the value"),
        ("\"\\q\"", 2, "invalid escape"), ("\"\\u12x4\"", 5, "invalid \\u escape"), ("\"abc", 4, "unterminated string"),
        ("[1 2]", 3, "expected ',' or ']'"), ("{\"a\":1 \"b\":2}", 7, "expected ',' or '}'"),
        ("-", 1, "unexpected end of input"),
        ("-x", 1, "invalid number"), ("1e+", 3, "invalid number"), ("{\"a\":1,}", 7, "expected a key"),
        ("\u{FEFF}[]", 0, "unexpected character"), ("[1]/* c */", 3, "unexpected text after the value"),
    ])
    func rejectsInvalidText(text: String, offset: Int, reason: String) {
        #expect(throws: JSONParsingError(offset: offset, reason: reason)) { try JSON(parsing: text) }
    }

    /// RFC 8259 section 8.1: JSON text is UTF-8. The offset is the first byte that is not.
    @Test func refusesInvalidUTF8() {
        let texts: [([UInt8], Int)] = [
            ([0x22, 0xFF, 0x22], 1), ([0x22, 0x61, 0xC3, 0x22], 2), ([0x5B, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x5D], 2),
        ]
        for (bytes, offset) in texts {
            #expect(throws: JSONParsingError(offset: offset, reason: "invalid UTF-8")) {
                try JSON(parsing: Data(bytes))
            }
        }
        #expect(throws: JSONParsingError(offset: 0, reason: "unexpected character")) { try JSON(parsing: Data([0xFF])) }
    }

    /// RFC 8259 section 8.2: a `\u` escape of half a surrogate pair is grammatical; it reads as
    /// U+FFFD, and a pair after it still reads as its character.
    @Test func loneSurrogatesReadAsTheReplacementCharacter() throws {
        #expect(try JSON(parsing: #""\ud800""#) == "\u{FFFD}")
        #expect(try JSON(parsing: #""a\udc00b""#) == "a\u{FFFD}b")
        #expect(try JSON(parsing: #""\ud800\ud83d\ude80""#) == "\u{FFFD}🚀")
        #expect(try JSON(parsing: #""\ud83d\u0041""#) == "\u{FFFD}A")
        #expect(try JSON(parsing: #"{"\udfff": 1}"#) == ["\u{FFFD}": 1])
    }

    @Test func aRepeatedNameKeepsItsLastValue() throws {
        #expect(try JSON(parsing: #"{"a": 1, "b": 2, "a": [3]}"#) == ["a": [3], "b": 2])
    }

    @Test func numbersAreIntegersWhenTheyFitAndDoublesOtherwise() throws {
        let text = "[0, -0, 9223372036854775807, -9223372036854775808, 9223372036854775808, 1.0, 1e2, -0.0, 1e-400]"
        let kinds = try #require(try JSON(parsing: text).arrayValue).map { value in
            switch value {
            case .int(let int): "int \(int)"
            case .double(let double): "double \(double)"
            default: "\(value)"
            }
        }
        #expect(
            kinds == [
                "int 0", "int 0", "int 9223372036854775807", "int -9223372036854775808", "double 9.223372036854776e+18",
                "double 1.0", "double 100.0", "double -0.0", "double 0.0",
            ])
    }

    @Test func refusesDeepNestingPastTheOneLimit() throws {
        let limit = JSON.maximumNestingDepth
        let deepest = String(repeating: "[", count: limit) + String(repeating: "]", count: limit)
        var value = try JSON(parsing: deepest)
        for _ in 1..<limit { value = value[0] }
        #expect(value == [])
        let deeper = "[" + deepest + "]"
        #expect(throws: JSONParsingError(offset: limit, reason: "nesting deeper than 512")) {
            try JSON(parsing: deeper)
        }
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParsingError(offset: limit, reason: "nesting deeper than 512")) { try JSON(parsing: deep) }
        let objects = String(repeating: #"{"a":"#, count: limit + 1) + "1" + String(repeating: "}", count: limit + 1)
        #expect(throws: JSONParsingError(offset: 5 * limit, reason: "nesting deeper than 512")) {
            try JSON(parsing: objects)
        }
    }

    @Test func errorsDescribeThemselves() {
        #expect("\(JSONParsingError(offset: 3, reason: "invalid number"))" == "invalid number at byte 3")
    }

    @Test func writesSortedCompactText() {
        let json: JSON = ["b": [1, 2.5, "x\"y\u{1}"], "a": nil, "c": ["z": true]]
        #expect(json.description == #"{"a":null,"b":[1,2.5,"x\"y\u0001"],"c":{"z":true}}"#)
    }

    @Test func roundTripsThroughText() throws {
        let json: JSON = ["name": "Zoë", "list": [1, 2, ["deep": [nil, false]]], "n": -0.125]
        #expect(try JSON(parsing: json.serialized()) == json)
        #expect(try JSON(parsing: json.serialized(prettyPrinted: true)) == json)
    }

    @Test func numbersCompareByValue() {
        #expect(JSON.int(2) == JSON.double(2.0))
        #expect(Set<JSON>([.int(2), .double(2.0)]).count == 1)
        #expect(JSON.int(2) != JSON.double(2.5))
    }

    @Test func convertsEncodableAndDecodable() throws {
        struct Point: Codable, Equatable {
            var x: Int
            var label: String?
        }
        let json = try JSON(encoding: Point(x: 3, label: "p"))
        #expect(json == ["x": 3, "label": "p"])
        #expect(try json.decode(Point.self) == Point(x: 3, label: "p"))
        let decoded = try JSONDecoder().decode(JSON.self, from: Data(#"{"k":[1,"two",null]}"#.utf8))
        #expect(decoded == ["k": [1, "two", nil]])
    }

    @Test func removesNullMembersRecursively() {
        let json: JSON = ["a": nil, "b": ["c": nil, "d": 1], "e": [nil, 2]]
        #expect(json.removingNullValues() == ["b": ["d": 1], "e": [nil, 2]])
    }
}
