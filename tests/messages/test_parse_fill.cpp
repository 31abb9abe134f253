// The output parser and message filler (docs/contract.md) against the independent numpy
// reference of reference.py (run at build time with the project venv) and against values
// worked out by hand in the tests below.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "drive/fill.h"
#include "drive/parse.h"

#ifndef OP_MESSAGES_REFERENCE
#error "OP_MESSAGES_REFERENCE must name the reference data file"
#endif

namespace {

using namespace op::drive;
using op::StatusCode;
using op::StatusOr;

struct Reference {
  std::map<std::string, std::vector<double>> numbers;
  std::map<std::string, std::string> texts;
};

Reference *g_ref = nullptr;

bool LoadReference(const std::string &path, Reference *ref) {
  std::ifstream in(path);
  if (!in)
    return false;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string key, second;
    s >> key >> second;
    if (second == "=") {
      std::string rest;
      std::getline(s, rest);
      ref->texts[key] = rest.substr(rest.find_first_not_of(' '));
      continue;
    }
    size_t n = std::stoul(second);
    std::vector<double> values(n);
    for (double &v : values)
      s >> v;
    if (!s)
      return false;
    ref->numbers[key] = std::move(values);
  }
  return true;
}

const std::vector<double> &Num(const std::string &key) {
  auto it = g_ref->numbers.find(key);
  if (it == g_ref->numbers.end()) {
    static const std::vector<double> empty;
    ADD_FAILURE() << "reference has no " << key;
    return empty;
  }
  return it->second;
}

std::vector<float> Floats(const std::string &key) {
  const auto &d = Num(key);
  return std::vector<float>(d.begin(), d.end());
}

// float32 results of exp-based formulas may differ from numpy's in the last bits (libm).
constexpr double kRel = 2e-6;

template <typename Array>
void ExpectClose(const Array &actual, const std::vector<double> &expected, const std::string &what,
                 double rel = kRel, double abs = 1e-7) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < expected.size() && bad < 5; i++) {
    double tol = abs + rel * std::fabs(expected[i]);
    if (!(std::fabs(actual[i] - expected[i]) <= tol)) {
      ADD_FAILURE() << what << "[" << i << "] = " << actual[i] << ", expected " << expected[i];
      bad++;
    }
  }
}

StatusOr<ParsedOutputs> ParseCase(const std::string &name) {
  OP_ASSIGN_OR_RETURN(SliceTable table, ParseSliceTable(g_ref->texts.at(name + ".slices")));
  std::vector<float> raw = Floats(name + ".raw");
  OP_ASSIGN_OR_RETURN(OutputParser parser, OutputParser::Create(table, raw.size()));
  ParsedOutputs out;
  OP_RETURN_IF_ERROR(parser.Parse(raw.data(), raw.size(), &out));
  return out;
}

void CompareParsed(const std::string &name) {
  auto parsed = ParseCase(name);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const ParsedOutputs &p = *parsed;
  ExpectClose(p.plan, Num(name + ".plan"), "plan", 0, 0);  // means are copied exactly
  ExpectClose(p.plan_std, Num(name + ".plan_std"), "plan_std");
  ExpectClose(p.lead, Num(name + ".lead"), "lead", 0, 0);
  ExpectClose(p.lead_std, Num(name + ".lead_std"), "lead_std");
  ExpectClose(p.lane_lines, Num(name + ".lane_lines"), "lane_lines", 0, 0);
  ExpectClose(p.lane_lines_std, Num(name + ".lane_lines_std"), "lane_lines_std");
  ExpectClose(p.road_edges, Num(name + ".road_edges"), "road_edges", 0, 0);
  ExpectClose(p.road_edges_std, Num(name + ".road_edges_std"), "road_edges_std");
  ExpectClose(p.pose, Num(name + ".pose"), "pose", 0, 0);
  ExpectClose(p.pose_std, Num(name + ".pose_std"), "pose_std");
  ExpectClose(p.wide_from_device_euler, Num(name + ".wide_from_device_euler"), "wide", 0, 0);
  ExpectClose(p.wide_from_device_euler_std, Num(name + ".wide_from_device_euler_std"), "wide_std");
  ExpectClose(p.road_transform, Num(name + ".road_transform"), "road_transform", 0, 0);
  ExpectClose(p.road_transform_std, Num(name + ".road_transform_std"), "road_transform_std");
  ExpectClose(p.lane_lines_prob, Num(name + ".lane_lines_prob"), "lane_lines_prob");
  ExpectClose(p.lead_prob, Num(name + ".lead_prob"), "lead_prob");
  ExpectClose(p.meta, Num(name + ".meta"), "meta");
  ExpectClose(p.desire_pred, Num(name + ".desire_pred"), "desire_pred");
  ExpectClose(p.desire_state, Num(name + ".desire_state"), "desire_state");
}

// ---- §5 parsing -------------------------------------------------------------------------------

TEST(Parse, FunctionsKnownAnswers) {
  EXPECT_FLOAT_EQ(SafeExp(0.0f), 1.0f);
  EXPECT_FLOAT_EQ(SafeExp(11.0f), std::exp(11.0f));
  EXPECT_FLOAT_EQ(SafeExp(50.0f), std::exp(11.0f));  // clipped
  EXPECT_FLOAT_EQ(Sigmoid(0.0f), 0.5f);
  EXPECT_FLOAT_EQ(Sigmoid(-50.0f), 1.0f / (1.0f + std::exp(11.0f)));  // clip applies to -x
  EXPECT_NEAR(Sigmoid(2.0f), 0.880797f, 1e-6);
  // exp(100) overflows float32: without subtracting the max this would be inf / inf.
  float in[3] = {100.0f, 101.0f, 100.0f}, out[3];
  Softmax(in, out, 3);
  const double e = std::exp(1.0);
  EXPECT_NEAR(out[0], 1 / (2 + e), 1e-7);
  EXPECT_NEAR(out[1], e / (2 + e), 1e-7);
  EXPECT_NEAR(out[2], 1 / (2 + e), 1e-7);
}

TEST(Parse, SingleHypothesisWidthsMatchReference) {
  SCOPED_TRACE("plan 990, lead 144");
  CompareParsed("single");
}

TEST(Parse, MultiHypothesisWidthsMatchReference) {
  SCOPED_TRACE("plan 4955, lead 102");
  CompareParsed("mhp");
  // The reference's choices are not all the first hypothesis, so selection is exercised.
  EXPECT_NE(Num("mhp.plan_hypothesis")[0], 0.0);
  const auto &leads = Num("mhp.lead_hypotheses");
  EXPECT_FALSE(leads[0] == leads[1] && leads[1] == leads[2]);
}

TEST(Parse, MultiHypothesisPicksTheMostProbableWhole) {
  // lead 102: 2 hypotheses of [24 means, 24 log-stds, 3 logits]. Hypothesis 1 wins selection
  // 0 and 2, hypothesis 0 wins selection 1; means tell the hypotheses apart.
  std::vector<float> raw(102);
  for (int h = 0; h < 2; h++) {
    float *row = raw.data() + h * 51;
    for (int i = 0; i < 24; i++)
      row[i] = 100.0f * h + i;
    for (int i = 0; i < 24; i++)
      row[24 + i] = std::log(2.0f + h);
  }
  raw[48] = 0.0f, raw[49] = 5.0f, raw[50] = 0.0f;                 // hypothesis 0 logits
  raw[51 + 48] = 1.0f, raw[51 + 49] = 1.0f, raw[51 + 50] = 3.0f;  // hypothesis 1
  auto parser = OutputParser::Create({{"lead", 0, 102}}, 102, 0);
  ASSERT_TRUE(parser.ok()) << parser.status().ToString();
  EXPECT_TRUE(parser->lead_multi_hypothesis());
  ParsedOutputs out;
  ASSERT_TRUE(parser->Parse(raw.data(), raw.size(), &out).ok());
  const int expected_hyp[3] = {1, 0, 1};
  for (int lead = 0; lead < 3; lead++)
    for (int i = 0; i < 24; i++) {
      EXPECT_EQ(out.lead[lead * 24 + i], 100.0f * expected_hyp[lead] + i);
      EXPECT_NEAR(out.lead_std[lead * 24 + i], 2.0f + expected_hyp[lead], 1e-6);
    }
}

TEST(Parse, MissingRequiredSlicesAreNamed) {
  SliceTable table = *ParseSliceTable(g_ref->texts.at("single.slices"));
  SliceTable without;
  for (const auto &s : table)
    if (s.name != "lead" && s.name != "pose")
      without.push_back(s);
  size_t size = Num("single.raw").size();
  auto all = OutputParser::Create(without, size, kAllServices);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), StatusCode::kNotFound);
  const std::string &msg = all.status().message();
  EXPECT_NE(msg.find("'lead' (needed by modelV2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'pose' (needed by cameraOdometry)"), std::string::npos) << msg;
  // Without the services that need them, the same table is fine.
  EXPECT_TRUE(OutputParser::Create(without, size, kServiceDrivingModelData).ok());
  auto odo = OutputParser::Create(without, size, kServiceCameraOdometry);
  ASSERT_FALSE(odo.ok());
  EXPECT_EQ(odo.status().message().find("'lead'"), std::string::npos);
}

TEST(Parse, BadSlicesAreRejectedWithTheReason) {
  auto wrong = OutputParser::Create({{"lead", 0, 100}}, 200, kServiceModelV2);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(
      wrong.status().message().find("'lead' is 100 floats wide; the contract knows 144 or 102"),
      std::string::npos)
      << wrong.status().message();
  auto past = OutputParser::Create({{"pose", 10, 22}}, 20, kServiceCameraOdometry);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("'pose' ends at 22"), std::string::npos);
  for (const char *text : {"pose:1", "pose:5:2", "pose:a:b", ":0:1", "pose:0:12,pose:12:24"}) {
    auto t = ParseSliceTable(text);
    EXPECT_FALSE(t.ok()) << text;
  }
  auto good = ParseSliceTable(" plan:0:990 , pad:990:1000");
  ASSERT_TRUE(good.ok());
  ASSERT_EQ(good->size(), 2u);
  EXPECT_EQ((*good)[1].name, "pad");
  EXPECT_EQ((*good)[1].end, 1000u);

  auto parser = OutputParser::Create({{"pose", 0, 12}}, 12, 0);
  ASSERT_TRUE(parser.ok());
  ParsedOutputs out;
  float raw[11] = {};
  EXPECT_EQ(parser->Parse(raw, 11, &out).code(), StatusCode::kInvalidArgument);
}

TEST(Parse, Services) {
  EXPECT_EQ(*ParseServices(""), kAllServices);
  EXPECT_EQ(*ParseServices("all"), kAllServices);
  EXPECT_EQ(*ParseServices("modelV2, cameraOdometry"), kServiceModelV2 | kServiceCameraOdometry);
  auto bad = ParseServices("modelV3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'modelV3'"), std::string::npos);
}

// ---- §6 filling -------------------------------------------------------------------------------

TEST(Fill, GridsKnownAnswers) {
  EXPECT_FLOAT_EQ(TIdxs()[0], 0.0f);
  EXPECT_FLOAT_EQ(TIdxs()[16], 2.5f);  // 10 (16/32)^2
  EXPECT_FLOAT_EQ(TIdxs()[32], 10.0f);
  EXPECT_FLOAT_EQ(XIdxs()[8], 12.0f);  // 192 (8/32)^2
  EXPECT_FLOAT_EQ(XIdxs()[32], 192.0f);
}

TEST(Fill, ActionMatchesReference) {
  for (const std::string name : {"single", "mhp"}) {
    SCOPED_TRACE(name);
    auto parsed = ParseCase(name);
    ASSERT_TRUE(parsed.ok());
    const auto &s = Num(name + ".settings");
    CarSettings car;
    car.v_ego = static_cast<float>(s[0]);
    car.lat_delay = static_cast<float>(s[1]);
    car.long_delay = static_cast<float>(s[2]);
    Action a = ComputeAction(*parsed, car, Action{});
    const auto &e = Num(name + ".action");
    EXPECT_NEAR(a.desired_curvature, e[0], 1e-6 + 1e-5 * std::fabs(e[0]));
    EXPECT_NEAR(a.desired_acceleration, e[1], 1e-6 + 1e-5 * std::fabs(e[1]));
    EXPECT_EQ(a.should_stop, e[2] != 0);
  }
}

TEST(Fill, ActionSmoothingAndHoldOverFrames) {
  const auto &plans = Num("seq.plans");
  const auto &v_ego = Num("seq.v_ego");
  const auto &expected = Num("seq.actions");
  const size_t frames = v_ego.size();
  ASSERT_EQ(plans.size(), frames * kIdxN * kPlanWidth);
  Action previous;
  int stops = 0, holds = 0;
  for (size_t f = 0; f < frames; f++) {
    ParsedOutputs p;
    for (size_t i = 0; i < p.plan.size(); i++)
      p.plan[i] = static_cast<float>(plans[f * p.plan.size() + i]);
    CarSettings car;
    car.v_ego = static_cast<float>(v_ego[f]);
    car.lat_delay = 0.2f;
    car.long_delay = 0.15f;
    Action a = ComputeAction(p, car, previous);
    const double *e = &expected[3 * f];
    SCOPED_TRACE("frame " + std::to_string(f));
    EXPECT_NEAR(a.desired_curvature, e[0], 1e-6 + 1e-5 * std::fabs(e[0]));
    EXPECT_NEAR(a.desired_acceleration, e[1], 1e-6 + 1e-5 * std::fabs(e[1]));
    EXPECT_EQ(a.should_stop, e[2] != 0);
    if (car.v_ego <= 0.3f) {
      EXPECT_EQ(a.desired_curvature, previous.desired_curvature);  // held exactly
      holds++;
    }
    stops += a.should_stop;
    previous = a;
  }
  // The sequence exercises both branches of both rules.
  EXPECT_GT(holds, 2);
  EXPECT_GT(stops, 0);
  EXPECT_LT(stops, static_cast<int>(frames));
}

TEST(Fill, PathPolynomialMatchesReferenceAndKnownCubic) {
  auto parsed = ParseCase("single");
  ASSERT_TRUE(parsed.ok());
  const auto &e = Num("single.path");
  for (int axis = 0; axis < 3; axis++) {
    auto c = FitPath(parsed->plan.data() + kPlanPosition + axis, kPlanWidth);
    for (int k = 0; k <= kPolyDegree; k++)
      EXPECT_NEAR(c[k], e[axis * 5 + k], 1e-7 + 1e-5 * std::fabs(e[axis * 5 + k]))
          << "axis " << axis << " power " << k;
  }
  // Points on 1 + 2t - 0.5t^2 + 0.01t^3 are fitted exactly.
  float y[kIdxN];
  for (int i = 0; i < kIdxN; i++) {
    double t = TIdxs()[i];
    y[i] = static_cast<float>(1 + 2 * t - 0.5 * t * t + 0.01 * t * t * t);
  }
  auto c = FitPath(y, 1);
  EXPECT_NEAR(c[0], 1.0, 1e-5);
  EXPECT_NEAR(c[1], 2.0, 1e-5);
  EXPECT_NEAR(c[2], -0.5, 1e-5);
  EXPECT_NEAR(c[3], 0.01, 1e-6);
  EXPECT_NEAR(c[4], 0.0, 1e-7);
}

TEST(Fill, HardBrakeAndConfidenceOverManyFrames) {
  const auto &ids = Num("seq.frame_ids");
  const auto &meta = Num("seq.meta");
  const auto &hard = Num("seq.hard_brake");
  const auto &conf = Num("seq.confidence");
  MessageFiller filler;
  FrameInfo frame;
  CarSettings car;
  int hard_count = 0, classes[3] = {};
  for (size_t f = 0; f < ids.size(); f++) {
    ParsedOutputs p;
    for (int i = 0; i < kMetaSize; i++)
      p.meta[i] = static_cast<float>(meta[f * kMetaSize + i]);
    frame.frame_id = static_cast<uint32_t>(ids[f]);
    FrameDecisions d = filler.Step(p, frame, car);
    ASSERT_EQ(d.hard_brake_predicted, hard[f] != 0) << "frame " << f;
    ASSERT_EQ(static_cast<int>(d.confidence), static_cast<int>(conf[f])) << "frame " << f;
    hard_count += d.hard_brake_predicted;
    classes[static_cast<int>(d.confidence)]++;
  }
  // Not a vacuous run: both hard-brake outcomes and all three classes occur.
  EXPECT_GT(hard_count, 10);
  EXPECT_LT(hard_count, static_cast<int>(ids.size()) - 10);
  for (int c : classes)
    EXPECT_GT(c, 10);
}

TEST(Fill, HardBrakeNeedsFiveConsecutiveFrames) {
  // By hand: brake-5 at 2 s = 0.2 and brake-3 at 2 s = 0.8 are above every threshold, so the
  // prediction turns on at the 5th such frame (the history starts at zero) and off at once.
  MessageFiller filler;
  ParsedOutputs p;
  p.meta[MetaDisengage(0) + kMetaHardBrake5] = 0.2f;
  p.meta[MetaDisengage(0) + kMetaHardBrake3] = 0.8f;
  FrameInfo frame;
  CarSettings car;
  for (int f = 1; f <= 4; f++)
    EXPECT_FALSE(filler.Step(p, frame, car).hard_brake_predicted) << f;
  EXPECT_TRUE(filler.Step(p, frame, car).hard_brake_predicted);
  p.meta[MetaDisengage(0) + kMetaHardBrake3] = 0.69f;  // brake 3 below 0.7 once
  EXPECT_FALSE(filler.Step(p, frame, car).hard_brake_predicted);
}

TEST(Fill, ConfidenceBufferByHand) {
  // Only the 10 s horizon has a disengage probability (brake 0.2), so p_any = [0,0,0,0,0.2] and
  // ind = [0,0,0,0,0.2]. The score reads the diagonal buf[4], buf[8], ..., buf[20]: horizon 4
  // of the oldest of the 5 updates down to horizon 0 of the newest, so this ind[4] counts only
  // once its update is the oldest, at the fifth update: score 0.2 / 5 = 0.04 → yellow.
  MessageFiller filler;
  ParsedOutputs p;
  p.meta[MetaDisengage(4) + kMetaBrakeDisengage] = 0.2f;
  FrameInfo frame;
  CarSettings car;
  using C = op::msg::ModelDataV2::ConfidenceClass;
  frame.frame_id = 40;
  EXPECT_EQ(filler.Step(p, frame, car).confidence, C::GREEN);
  EXPECT_FLOAT_EQ(filler.disengage_buffer()[24], 0.2f);
  EXPECT_FLOAT_EQ(filler.disengage_buffer()[23], 0.0f);
  frame.frame_id = 41;  // not a multiple of 40: no shift
  for (int i = 0; i < 3; i++)
    EXPECT_EQ(filler.Step(p, frame, car).confidence, C::GREEN);
  EXPECT_FLOAT_EQ(filler.disengage_buffer()[19], 0.0f);
  for (uint32_t id : {80u, 120u, 160u}) {
    frame.frame_id = id;
    EXPECT_EQ(filler.Step(p, frame, car).confidence, C::GREEN) << id;
  }
  frame.frame_id = 200;
  EXPECT_EQ(filler.Step(p, frame, car).confidence, C::YELLOW);
  // Now a probability at 2 s of 0.4 enters at horizon 0 of the newest: with the 0.2 at 10 s of
  // the (new) oldest update: (0.4 + 0.2) / 5 = 0.12 → red.
  p.meta[MetaDisengage(0) + kMetaBrakeDisengage] = 0.4f;
  frame.frame_id = 240;
  EXPECT_EQ(filler.Step(p, frame, car).confidence, C::RED);
}

TEST(Fill, FrameDropFilterByHand) {
  FrameDropFilter filter;
  for (int i = 0; i < 10; i++) {
    filter.Update(5);
    EXPECT_EQ(filter.Percent(), 0.0f) << i;  // held at 0 for the first 10 frames
  }
  filter.Update(30);  // clipped to 10: f = 10 * 0.05 / 10.05
  double f = 10 * 0.05 / 10.05;
  EXPECT_NEAR(filter.Percent(), 100 * f / (1 + f), 1e-5);
  filter.Update(0);
  f *= 1 - 0.05 / 10.05;
  EXPECT_NEAR(filter.Percent(), 100 * f / (1 + f), 1e-5);
}

TEST(Fill, MessagesCarryTheParsedValues) {
  auto parsed = ParseCase("single");
  ASSERT_TRUE(parsed.ok());
  const ParsedOutputs &p = *parsed;
  // meta[i] = i / 100 makes the index map visible in the message.
  ParsedOutputs q = p;
  for (int i = 0; i < kMetaSize; i++)
    q.meta[i] = i / 100.0f;
  MessageFiller filler;
  FrameInfo frame;
  frame.frame_id = 7, frame.frame_id_extra = 9, frame.frame_age = 1, frame.dropped_frames = 1;
  frame.frame_drop_perc = 2.5f, frame.timestamp_eof = 123456789, frame.model_execution_time = 0.02f;
  frame.calibration_seen = true, frame.log_mono_time = 42;
  CarSettings car;
  car.v_ego = 12.5f, car.lat_delay = 0.2f, car.long_delay = 0.15f;
  car.lane_change_state = op::msg::LaneChangeState::LANE_CHANGE_STARTING;
  car.lane_change_direction = op::msg::LaneChangeDirection::LEFT;
  FrameDecisions d = filler.Step(q, frame, car);

  capnp::MallocMessageBuilder mb;
  auto event = mb.initRoot<op::msg::Event>();
  MessageFiller::FillModelV2(event, q, frame, car, d);
  auto r = event.asReader();
  EXPECT_EQ(r.getLogMonoTime(), 42u);
  EXPECT_TRUE(r.getValid());
  ASSERT_TRUE(r.isModelV2());
  auto m = r.getModelV2();
  EXPECT_EQ(m.getFrameId(), 7u);
  EXPECT_EQ(m.getFrameIdExtra(), 9u);
  EXPECT_EQ(m.getFrameAge(), 1u);
  EXPECT_EQ(m.getFrameDropPerc(), 2.5f);
  EXPECT_EQ(m.getTimestampEof(), 123456789u);
  EXPECT_EQ(m.getModelExecutionTime(), 0.02f);
  ASSERT_EQ(m.getPosition().getX().size(), 33u);
  EXPECT_EQ(m.getPosition().getT()[16], 2.5f);
  EXPECT_EQ(m.getPosition().getY()[3], p.Plan(3, 1));
  EXPECT_EQ(m.getPosition().getZStd()[5], p.PlanStd(5, 2));
  EXPECT_EQ(m.getVelocity().getX()[2], p.Plan(2, 3));
  EXPECT_EQ(m.getVelocity().getXStd().size(), 0u);  // no stds except position
  EXPECT_EQ(m.getAcceleration().getZ()[32], p.Plan(32, 8));
  EXPECT_EQ(m.getOrientation().getY()[1], p.Plan(1, 10));
  EXPECT_EQ(m.getOrientationRate().getZ()[0], p.Plan(0, 14));
  ASSERT_EQ(m.getLaneLines().size(), 4u);
  EXPECT_EQ(m.getLaneLines()[2].getT().size(), 0u);
  EXPECT_TRUE(m.getLaneLines()[2].hasT());  // an empty list, as openpilot sends
  EXPECT_EQ(m.getLaneLines()[2].getX()[32], 192.0f);
  EXPECT_EQ(m.getLaneLines()[2].getY()[4], p.LaneLine(2, 4, 0));
  EXPECT_EQ(m.getLaneLines()[3].getZ()[6], p.LaneLine(3, 6, 1));
  for (int i = 0; i < 4; i++) {
    EXPECT_EQ(m.getLaneLineProbs()[i], p.lane_lines_prob[2 * i + 1]);
    EXPECT_EQ(m.getLaneLineStds()[i], p.lane_lines_std[i * 66]);
  }
  ASSERT_EQ(m.getRoadEdges().size(), 2u);
  EXPECT_EQ(m.getRoadEdges()[1].getY()[10], p.RoadEdge(1, 10, 0));
  EXPECT_EQ(m.getRoadEdgeStds()[1], p.road_edges_std[66]);
  ASSERT_EQ(m.getLeadsV3().size(), 3u);
  auto lead = m.getLeadsV3()[2];
  EXPECT_EQ(lead.getProb(), p.lead_prob[2]);
  EXPECT_EQ(lead.getProbTime(), 4.0f);
  EXPECT_EQ(lead.getT()[5], 10.0f);
  EXPECT_EQ(lead.getV()[3], p.Lead(2, 3, 2));
  EXPECT_EQ(lead.getAStd()[1], p.LeadStd(2, 1, 3));
  auto meta = m.getMeta();
  EXPECT_EQ(meta.getEngagedProb(), 0.0f);
  EXPECT_EQ(meta.getDesireState()[3], p.desire_state[3]);
  EXPECT_EQ(meta.getDesirePrediction()[31], p.desire_pred[31]);
  auto dp = meta.getDisengagePredictions();
  // The index map by hand: gas 1+6k, brake 2+6k, steer 3+6k, hard brake 4/5/6+6k;
  // gas press 31+4k, brake press 32+4k.
  const float t[5] = {2, 4, 6, 8, 10};
  for (int k = 0; k < 5; k++) {
    EXPECT_EQ(dp.getT()[k], t[k]);
    EXPECT_EQ(dp.getGasDisengageProbs()[k], (1 + 6 * k) / 100.0f);
    EXPECT_EQ(dp.getBrakeDisengageProbs()[k], (2 + 6 * k) / 100.0f);
    EXPECT_EQ(dp.getSteerOverrideProbs()[k], (3 + 6 * k) / 100.0f);
    EXPECT_EQ(dp.getBrake3MetersPerSecondSquaredProbs()[k], (4 + 6 * k) / 100.0f);
    EXPECT_EQ(dp.getBrake4MetersPerSecondSquaredProbs()[k], (5 + 6 * k) / 100.0f);
    EXPECT_EQ(dp.getBrake5MetersPerSecondSquaredProbs()[k], (6 + 6 * k) / 100.0f);
  }
  ASSERT_EQ(dp.getGasPressProbs().size(), 6u);
  for (int k = 0; k < 6; k++) {
    EXPECT_EQ(dp.getGasPressProbs()[k], (31 + 4 * k) / 100.0f);
    EXPECT_EQ(dp.getBrakePressProbs()[k], (32 + 4 * k) / 100.0f);
  }
  EXPECT_EQ(meta.getLaneChangeState(), op::msg::LaneChangeState::LANE_CHANGE_STARTING);
  EXPECT_EQ(meta.getLaneChangeDirection(), op::msg::LaneChangeDirection::LEFT);
  EXPECT_EQ(m.getConfidence(), d.confidence);
  EXPECT_EQ(m.getAction().getDesiredCurvature(), d.action.desired_curvature);
  EXPECT_EQ(m.getAction().getDesiredAcceleration(), d.action.desired_acceleration);

  capnp::MallocMessageBuilder mb2;
  auto e2 = mb2.initRoot<op::msg::Event>();
  MessageFiller::FillDrivingModelData(e2, q, frame, car, d);
  ASSERT_TRUE(e2.asReader().isDrivingModelData());
  auto dm = e2.asReader().getDrivingModelData();
  EXPECT_EQ(dm.getFrameId(), 7u);
  EXPECT_EQ(dm.getFrameIdExtra(), 9u);
  EXPECT_EQ(dm.getFrameDropPerc(), 2.5f);
  EXPECT_EQ(dm.getModelExecutionTime(), 0.02f);
  EXPECT_EQ(dm.getAction().getDesiredAcceleration(), d.action.desired_acceleration);
  EXPECT_EQ(dm.getLaneLineMeta().getLeftY(), m.getLaneLines()[1].getY()[0]);
  EXPECT_EQ(dm.getLaneLineMeta().getRightY(), m.getLaneLines()[2].getY()[0]);
  EXPECT_EQ(dm.getLaneLineMeta().getLeftProb(), m.getLaneLineProbs()[1]);
  EXPECT_EQ(dm.getLaneLineMeta().getRightProb(), m.getLaneLineProbs()[2]);
  ASSERT_EQ(dm.getPath().getYCoefficients().size(), 5u);
  EXPECT_EQ(dm.getPath().getYCoefficients()[2], d.path_y[2]);
  EXPECT_EQ(dm.getMeta().getLaneChangeDirection(), op::msg::LaneChangeDirection::LEFT);

  capnp::MallocMessageBuilder mb3;
  auto e3 = mb3.initRoot<op::msg::Event>();
  MessageFiller::FillCameraOdometry(e3, q, frame);
  auto co = e3.asReader().getCameraOdometry();
  EXPECT_FALSE(e3.asReader().getValid());  // a frame was dropped just before
  EXPECT_EQ(co.getFrameId(), 7u);
  EXPECT_EQ(co.getTimestampEof(), 123456789u);
  EXPECT_EQ(co.getTrans()[2], p.pose[2]);
  EXPECT_EQ(co.getRot()[0], p.pose[3]);
  EXPECT_EQ(co.getRotStd()[2], p.pose_std[5]);
  EXPECT_EQ(co.getWideFromDeviceEuler()[1], p.wide_from_device_euler[1]);
  EXPECT_EQ(co.getRoadTransformTrans()[2], p.road_transform[2]);
  EXPECT_EQ(co.getRoadTransformTransStd()[0], p.road_transform_std[0]);
  frame.dropped_frames = 0;
  MessageFiller::FillCameraOdometry(e3, q, frame);
  EXPECT_TRUE(e3.asReader().getValid());
}

}  // namespace

int main(int argc, char **argv) {
  static Reference ref;
  if (!LoadReference(OP_MESSAGES_REFERENCE, &ref)) {
    std::fprintf(stderr, "SKIP: no reference data at %s (the project venv makes it)\n",
                 OP_MESSAGES_REFERENCE);
    return 77;
  }
  g_ref = &ref;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
