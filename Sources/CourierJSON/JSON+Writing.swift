import Foundation

extension JSON {
    /// JSON text for this value: keys sorted, no insignificant whitespace unless `prettyPrinted`
    /// (two-space indentation). JSON has no NaN or infinity: non-finite doubles are written as
    /// `null` here, and refused by Courier's request serializers.
    public func serialized(prettyPrinted: Bool = false) -> Data {
        var writer = JSONWriter(pretty: prettyPrinted)
        writer.write(self, indent: 0)
        return Data(writer.output)
    }
}

private struct JSONWriter {
    let pretty: Bool
    var output: [UInt8] = []

    init(pretty: Bool) {
        self.pretty = pretty
        output.reserveCapacity(256)
    }

    mutating func write(_ value: JSON, indent: Int) {
        switch value {
        case .null: append("null")
        case .bool(let bool): append(bool ? "true" : "false")
        case .int(let int): append(String(int))
        case .double(let double):
            if double.isFinite {
                if let integer = Int(exactly: double), abs(double) < 1e15 {
                    append(String(integer))
                } else {
                    append(String(double))
                }
            } else {
                append("null")
            }
        case .string(let string): writeString(string)
        case .array(let array):
            if array.isEmpty {
                append("[]")
                return
            }
            output.append(UInt8(ascii: "["))
            for (position, element) in array.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                write(element, indent: indent + 1)
            }
            newline(indent)
            output.append(UInt8(ascii: "]"))
        case .object(let object):
            if object.isEmpty {
                append("{}")
                return
            }
            output.append(UInt8(ascii: "{"))
            for (position, key) in object.keys.sorted().enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                writeString(key)
                append(pretty ? ": " : ":")
                write(object[key]!, indent: indent + 1)
            }
            newline(indent)
            output.append(UInt8(ascii: "}"))
        }
    }

    mutating func newline(_ indent: Int) {
        guard pretty else { return }
        output.append(0x0A)
        output.append(contentsOf: repeatElement(0x20, count: indent * 2))
    }

    mutating func append(_ text: String) {
        output.append(contentsOf: text.utf8)
    }

    mutating func writeString(_ string: String) {
        output.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): append("\\\"")
            case UInt8(ascii: "\\"): append("\\\\")
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            case 0x08: append("\\b")
            case 0x0C: append("\\f")
            case 0..<0x20:
                append("\\u00")
                let hex = Array("0123456789abcdef".utf8)
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0xF)])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}
