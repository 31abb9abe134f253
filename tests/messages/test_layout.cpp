// The compiled layout of schemas/log.capnp against the wire layout the openpilot contract lists
// (section 7): every ordinal's type and place, and each struct's data-word and pointer counts.
// The expectations are written out from the contract page, not derived from the schema.
#include <gtest/gtest.h>

#include <capnp/schema.h>

#include <map>
#include <string>

#include "log.capnp.h"

namespace {

using capnp::StructSchema;
using Which = capnp::schema::Type::Which;

std::string TypeName(capnp::Type type) {
  switch (type.which()) {
    case Which::VOID:
      return "void";
    case Which::BOOL:
      return "bool";
    case Which::INT8:
      return "int8";
    case Which::INT16:
      return "int16";
    case Which::INT32:
      return "int32";
    case Which::INT64:
      return "int64";
    case Which::UINT8:
      return "uint8";
    case Which::UINT16:
      return "uint16";
    case Which::UINT32:
      return "uint32";
    case Which::UINT64:
      return "uint64";
    case Which::FLOAT32:
      return "float32";
    case Which::FLOAT64:
      return "float64";
    case Which::TEXT:
      return "text";
    case Which::DATA:
      return "data";
    case Which::LIST:
      return "list<" + TypeName(type.asList().getElementType()) + ">";
    case Which::ENUM:
      return "enum";
    case Which::STRUCT:
      return "struct";
    case Which::INTERFACE:
      return "interface";
    case Which::ANY_POINTER:
      return "anypointer";
  }
  return "?";
}

// Bits per element of a data-section type, 0 for pointers and Void.
unsigned DataBits(capnp::Type type) {
  switch (type.which()) {
    case Which::BOOL:
      return 1;
    case Which::INT8:
    case Which::UINT8:
      return 8;
    case Which::INT16:
    case Which::UINT16:
    case Which::ENUM:
      return 16;
    case Which::INT32:
    case Which::UINT32:
    case Which::FLOAT32:
      return 32;
    case Which::INT64:
    case Which::UINT64:
    case Which::FLOAT64:
      return 64;
    default:
      return 0;
  }
}

// "float32@byte8", "bool@bit80", "list<float32>@p5", "struct@p0", "void".
std::string Place(StructSchema::Field field) {
  capnp::Type type = field.getType();
  std::string name = TypeName(type);
  if (type.which() == Which::VOID)
    return name;
  uint32_t offset = field.getProto().getSlot().getOffset();
  unsigned bits = DataBits(type);
  if (bits == 1)
    return name + "@bit" + std::to_string(offset);
  if (bits > 0)
    return name + "@byte" + std::to_string(offset * bits / 8);
  return name + "@p" + std::to_string(offset);
}

void ExpectStruct(StructSchema schema, unsigned data_words, unsigned pointers,
                  const std::map<unsigned, std::string> &expected) {
  auto node = schema.getProto().getStruct();
  SCOPED_TRACE(schema.getShortDisplayName().cStr());
  EXPECT_EQ(node.getDataWordCount(), data_words);
  EXPECT_EQ(node.getPointerCount(), pointers);
  std::map<unsigned, std::string> actual;
  for (auto field : schema.getFields()) {
    if (field.getProto().isGroup()) {
      // A group's members live in the parent's sections (openpilot's `deprecated` groups).
      for (auto member : field.getType().asStruct().getFields()) {
        ASSERT_TRUE(member.getProto().isSlot()) << member.getProto().getName().cStr();
        actual[member.getProto().getOrdinal().getExplicit()] = Place(member);
      }
      continue;
    }
    ASSERT_TRUE(field.getProto().isSlot()) << field.getProto().getName().cStr();
    actual[field.getProto().getOrdinal().getExplicit()] = Place(field);
  }
  EXPECT_EQ(actual, expected);
}

TEST(Layout, Event) {
  auto schema = capnp::Schema::from<op::msg::Event>();
  auto node = schema.getProto().getStruct();
  EXPECT_EQ(node.getDataWordCount(), 2u);
  EXPECT_EQ(node.getPointerCount(), 1u);
  // Discriminant: u16 at byte 8 (the offset is counted in 16-bit units).
  EXPECT_EQ(node.getDiscriminantOffset() * 2, 8u);
  EXPECT_EQ(node.getDiscriminantCount(), 150u);

  std::map<unsigned, StructSchema::Field> by_ordinal;
  for (auto field : schema.getFields())
    by_ordinal.emplace(field.getProto().getOrdinal().getExplicit(), field);
  ASSERT_EQ(by_ordinal.size(), 152u);  // @0 .. @151, none missing
  EXPECT_EQ(Place(by_ordinal.at(0)), "uint64@byte0");
  EXPECT_EQ(Place(by_ordinal.at(67)), "bool@bit80");
  EXPECT_TRUE(by_ordinal.at(67).getProto().getSlot().getDefaultValue().getBool());
  EXPECT_EQ(by_ordinal.at(0).getProto().getDiscriminantValue(),
            capnp::schema::Field::NO_DISCRIMINANT);
  EXPECT_EQ(by_ordinal.at(67).getProto().getDiscriminantValue(),
            capnp::schema::Field::NO_DISCRIMINANT);

  // Every other ordinal is a union member whose discriminant is its position in ordinal order,
  // and whose payload is pointer 0 (or nothing, for the Void placeholders).
  uint16_t position = 0;
  for (unsigned ordinal = 1; ordinal <= 151; ordinal++) {
    if (ordinal == 67)
      continue;
    auto field = by_ordinal.at(ordinal);
    SCOPED_TRACE("ordinal " + std::to_string(ordinal));
    EXPECT_EQ(field.getProto().getDiscriminantValue(), position);
    std::string place = Place(field);
    EXPECT_TRUE(place == "void" || place == "struct@p0") << place;
    position++;
  }

  // The members we write or read, by name, ordinal and discriminant.
  const std::map<std::string, std::pair<unsigned, uint16_t>> used = {
      {"roadCameraState", {2, 1}},   {"deviceState", {6, 5}},
      {"liveCalibration", {19, 18}}, {"carState", {22, 21}},
      {"carControl", {23, 22}},      {"carParams", {69, 67}},
      {"cameraOdometry", {63, 62}},  {"driverMonitoringState", {151, 149}},
      {"modelV2", {75, 73}},         {"drivingModelData", {128, 126}},
      {"liveDelay", {146, 144}},
  };
  for (const auto &[name, where] : used) {
    auto field = schema.getFieldByName(name);
    EXPECT_EQ(field.getProto().getOrdinal().getExplicit(), where.first) << name;
    EXPECT_EQ(field.getProto().getDiscriminantValue(), where.second) << name;
    EXPECT_EQ(Place(field), "struct@p0") << name;
  }
  // The generated enum agrees with the schema.
  EXPECT_EQ(static_cast<int>(op::msg::Event::MODEL_V2), 73);
  EXPECT_EQ(static_cast<int>(op::msg::Event::CAMERA_ODOMETRY), 62);
  EXPECT_EQ(static_cast<int>(op::msg::Event::DRIVING_MODEL_DATA), 126);
}

TEST(Layout, ModelDataV2) {
  ExpectStruct(capnp::Schema::from<op::msg::ModelDataV2>(), 6, 17,
               {{0, "uint32@byte0"},      {1, "uint32@byte4"},      {2, "float32@byte8"},
                {3, "uint64@byte16"},     {4, "struct@p0"},         {5, "struct@p1"},
                {6, "struct@p2"},         {7, "struct@p3"},         {8, "list<struct>@p4"},
                {9, "list<float32>@p5"},  {10, "list<struct>@p6"},  {11, "list<struct>@p7"},
                {12, "struct@p8"},        {13, "list<float32>@p9"}, {14, "list<float32>@p10"},
                {15, "float32@byte12"},   {16, "data@p11"},         {17, "float32@byte24"},
                {18, "list<struct>@p12"}, {19, "struct@p13"},       {20, "uint32@byte28"},
                {21, "struct@p14"},       {22, "bool@bit256"},      {23, "enum@byte34"},
                {24, "uint64@byte40"},    {25, "struct@p15"},       {26, "struct@p16"}});
}

TEST(Layout, NestedModelStructs) {
  std::map<unsigned, std::string> xyzt;
  for (unsigned i = 0; i < 7; i++)
    xyzt[i] = "list<float32>@p" + std::to_string(i);
  ExpectStruct(capnp::Schema::from<op::msg::XYZTData>(), 0, 7, xyzt);

  std::map<unsigned, std::string> lead = {{0, "float32@byte0"}, {1, "float32@byte4"}};
  for (unsigned i = 2; i <= 10; i++)
    lead[i] = "list<float32>@p" + std::to_string(i - 2);
  ExpectStruct(capnp::Schema::from<op::msg::ModelDataV2::LeadDataV3>(), 1, 9, lead);

  ExpectStruct(capnp::Schema::from<op::msg::ModelDataV2::MetaData>(), 3, 3,
               {{0, "float32@byte0"},
                {1, "list<float32>@p0"},
                {2, "float32@byte4"},
                {3, "float32@byte8"},
                {4, "float32@byte12"},
                {5, "list<float32>@p1"},
                {6, "struct@p2"},
                {7, "bool@bit128"},
                {8, "enum@byte18"},
                {9, "enum@byte20"}});

  std::map<unsigned, std::string> disengage;
  for (unsigned i = 0; i < 9; i++)
    disengage[i] = "list<float32>@p" + std::to_string(i);
  ExpectStruct(capnp::Schema::from<op::msg::ModelDataV2::DisengagePredictions>(), 0, 9, disengage);

  ExpectStruct(capnp::Schema::from<op::msg::ModelDataV2::Action>(), 2, 0,
               {{0, "float32@byte0"}, {1, "float32@byte4"}, {2, "bool@bit64"}});
}

TEST(Layout, DrivingModelData) {
  ExpectStruct(capnp::Schema::from<op::msg::DrivingModelData>(), 2, 4,
               {{0, "uint32@byte0"},
                {1, "uint32@byte4"},
                {2, "struct@p0"},
                {3, "struct@p1"},
                {4, "struct@p2"},
                {5, "struct@p3"},
                {6, "float32@byte8"},
                {7, "float32@byte12"}});
  ExpectStruct(capnp::Schema::from<op::msg::DrivingModelData::PolyPath>(), 0, 3,
               {{0, "list<float32>@p0"}, {1, "list<float32>@p1"}, {2, "list<float32>@p2"}});
  ExpectStruct(
      capnp::Schema::from<op::msg::DrivingModelData::LaneLineMeta>(), 2, 0,
      {{0, "float32@byte0"}, {1, "float32@byte4"}, {2, "float32@byte8"}, {3, "float32@byte12"}});
  ExpectStruct(capnp::Schema::from<op::msg::DrivingModelData::MetaData>(), 1, 0,
               {{0, "enum@byte0"}, {1, "enum@byte2"}});
}

TEST(Layout, CameraOdometry) {
  ExpectStruct(capnp::Schema::from<op::msg::CameraOdometry>(), 2, 8,
               {{0, "list<float32>@p0"},
                {1, "list<float32>@p1"},
                {2, "list<float32>@p2"},
                {3, "list<float32>@p3"},
                {4, "uint32@byte0"},
                {5, "uint64@byte8"},
                {6, "list<float32>@p4"},
                {7, "list<float32>@p5"},
                {8, "list<float32>@p6"},
                {9, "list<float32>@p7"}});
}

TEST(Layout, LiveCalibrationData) {
  ExpectStruct(capnp::Schema::from<op::msg::LiveCalibrationData>(), 2, 8,
               {{0, "list<float32>@p0"},
                {1, "int8@byte0"},
                {2, "int32@byte4"},
                {3, "int8@byte1"},
                {4, "list<float32>@p1"},
                {5, "list<float32>@p2"},
                {6, "list<float32>@p3"},
                {7, "list<float32>@p4"},
                {8, "list<float32>@p5"},
                {9, "int32@byte8"},
                {10, "list<float32>@p6"},
                {11, "enum@byte2"},
                {12, "list<float32>@p7"}});
}

// Not on the contract page: the leading fields a replay reads from openpilot's roadCameraState
// and liveDelay, placed by hand with Cap'n Proto's rules (ordinal order, first hole that fits).
TEST(Layout, ReplayInputs) {
  auto frame = capnp::Schema::from<op::msg::FrameData>();
  std::map<unsigned, std::string> actual;
  for (auto field : frame.getFields())
    actual[field.getProto().getOrdinal().getExplicit()] = Place(field);
  EXPECT_EQ(actual, (std::map<unsigned, std::string>{{0, "uint32@byte0"},
                                                     {1, "uint32@byte4"},
                                                     {2, "uint64@byte8"},
                                                     {3, "int32@byte16"},
                                                     {4, "int32@byte20"},
                                                     {5, "int32@byte24"},
                                                     {6, "data@p0"},
                                                     {7, "uint16@byte28"},
                                                     {8, "uint64@byte32"}}));
  ExpectStruct(capnp::Schema::from<op::msg::LiveDelayData>(), 2, 0,
               {{0, "float32@byte0"}, {1, "int32@byte4"}, {2, "enum@byte8"}});
  // openpilot's CarState: vEgo @1 is the first data field (ordinal 0 is a pointer).
  ExpectStruct(capnp::Schema::from<op::msg::CarState>(), 1, 1,
               {{0, "list<uint16>@p0"}, {1, "float32@byte0"}});
  // openpilot's CarParams up to longitudinalActuatorDelay @58, laid out by hand: @0/@1 Text, five
  // Bools in bits 0-4, @7/@8 Float32 at bytes 4/8, the @9 enum in bits 16-31, @10 Int16 at byte
  // 12, six lists, eight Float32 at bytes 16-44, the struct union's tag at byte 14 (its second
  // member @27), ..., steerActuatorDelay @36 opening the ninth word (byte 64), and @58 the last
  // Float32 at byte 100.
  auto car = capnp::Schema::from<op::msg::CarParams>();
  EXPECT_EQ(Place(car.getFieldByName("steerActuatorDelay")), "float32@byte64");
  EXPECT_EQ(Place(car.getFieldByName("longitudinalActuatorDelay")), "float32@byte100");
  EXPECT_EQ(car.getProto().getStruct().getDataWordCount(), 13u);
  EXPECT_EQ(car.getProto().getStruct().getPointerCount(), 13u);
  auto lateral = car.getFieldByName("reservedUnion").getType().asStruct().getProto().getStruct();
  EXPECT_EQ(lateral.getDiscriminantOffset(), 7u);  // in 16-bit units: byte 14
}

// The enums' values are on the wire too.
TEST(Layout, Enums) {
  EXPECT_EQ(static_cast<int>(op::msg::LaneChangeState::LANE_CHANGE_FINISHING), 3);
  EXPECT_EQ(static_cast<int>(op::msg::LaneChangeDirection::RIGHT), 2);
  EXPECT_EQ(static_cast<int>(op::msg::ModelDataV2::ConfidenceClass::RED), 0);
  EXPECT_EQ(static_cast<int>(op::msg::ModelDataV2::ConfidenceClass::GREEN), 2);
}

}  // namespace
