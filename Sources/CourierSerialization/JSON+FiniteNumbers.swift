import CourierCore
import CourierJSON

extension JSON {
    /// Throws `CourierError.serializationFailed`, naming where, when a double anywhere in the
    /// value is NaN or infinite: JSON cannot carry them, and sending `null` instead would change
    /// the caller's data without a word (the `Encodable` path refuses them too).
    func requireFiniteNumbers(at path: String = "") throws(CourierError) {
        switch self {
        case .double(let double) where !double.isFinite:
            let place = path.isEmpty ? "The parameters are" : "The parameter \(path) is"
            throw .serializationFailed(.init(message: "\(place) \(double), which JSON cannot represent"))
        case .array(let elements):
            for (index, element) in elements.enumerated() { try element.requireFiniteNumbers(at: "\(path)[\(index)]") }
        case .object(let members):
            for (name, member) in members {
                try member.requireFiniteNumbers(at: path.isEmpty ? name : "\(path).\(name)")
            }
        default:
            break
        }
    }
}
