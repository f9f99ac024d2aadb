// Standard value types are their own identity, so they can be used directly as items or as
// section models (`ListSection(model: "Today", items: …)`).

extension String: Diffable {}
extension Substring: Diffable {}
extension Character: Diffable {}
extension Bool: Diffable {}
extension Int: Diffable {}
extension Int8: Diffable {}
extension Int16: Diffable {}
extension Int32: Diffable {}
extension Int64: Diffable {}
extension UInt: Diffable {}
extension UInt8: Diffable {}
extension UInt16: Diffable {}
extension UInt32: Diffable {}
extension UInt64: Diffable {}
