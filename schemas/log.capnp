# The driving messages, wire-compatible with openpilot's cereal `log.capnp`.
#
# This is our own schema: its own file id, struct ids and comments. What openpilot's readers see
# on the wire is only ordinals, types and therefore offsets, and those follow
# the openpilot contract (docs/messages.md, design page section 7) exactly. tests/messages/test_layout.cpp checks every
# offset, data-word and pointer count listed there against the compiled schema.
#
# Rules for editing (the same as cereal's):
#   - never renumber or retype a field; add new fields with the next free ordinal;
#   - a field we do not use stays as a placeholder of the same kind, so the layout is kept:
#     same scalar type, or a pointer of the same kind (empty struct `Reserved`, List(Float32),
#     List(Reserved)); only inside a union may a pointer become Void (the union's pointer slot
#     is shared, so the member's type never moves anything else);
#   - units go in names where they are not SI seconds / metres / radians.

@0xb47f30c28b523261;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("op::msg");

# An empty struct standing in for an openpilot struct we neither write nor read. Any struct
# pointer decodes as one, so logs from openpilot still read.
struct Reserved {}

# One log entry or one published message.
struct Event {
  logMonoTime @0 :UInt64;  # ns, monotonic clock of the writer
  valid @67 :Bool = true;

  # Every other ordinal up to 151 is a member of this union; which() is the position of the
  # member in ordinal order. Members we do not decode are Void: the discriminant is still read,
  # so `oplog list` names every service of an openpilot log.
  union {
    initData @1 :Void;
    roadCameraState @2 :FrameData;  # which() = 1
    gpsNMEA @3 :Void;
    sensorEventDEPRECATED @4 :Void;
    can @5 :Void;
    deviceState @6 :DeviceState;  # which() = 5
    controlsState @7 :Void;
    liveEventDEPRECATED @8 :Void;
    model @9 :Void;
    featuresDEPRECATED @10 :Void;
    sensorEventsDEPRECATED @11 :Void;
    pandaStateDEPRECATED @12 :Void;
    radarState @13 :Void;
    liveUIDEPRECATED @14 :Void;
    roadEncodeIdx @15 :Void;
    liveTracksDEPRECATED @16 :Void;
    sendcan @17 :Void;
    logMessage @18 :Void;
    liveCalibration @19 :LiveCalibrationData;  # which() = 18
    androidLog @20 :Void;
    gpsLocation @21 :Void;
    carState @22 :CarState;  # which() = 21
    carControl @23 :CarControl;  # which() = 22
    longitudinalPlan @24 :Void;
    liveLocationDEPRECATED @25 :Void;
    ethernetDataDEPRECATED @26 :Void;
    navUpdateDEPRECATED @27 :Void;
    cellInfoDEPRECATED @28 :Void;
    wifiScanDEPRECATED @29 :Void;
    androidGnssDEPRECATED @30 :Void;
    qcomGnss @31 :Void;
    lidarPtsDEPRECATED @32 :Void;
    procLog @33 :Void;
    ubloxGnss @34 :Void;
    clocks @35 :Void;
    liveMpcDEPRECATED @36 :Void;
    liveLongitudinalMpcDEPRECATED @37 :Void;
    navStatusDEPRECATED @38 :Void;
    ubloxRaw @39 :Void;
    gpsPlannerPointsDEPRECATED @40 :Void;
    gpsPlannerPlanDEPRECATED @41 :Void;
    applanixRawDEPRECATED @42 :Void;
    trafficEventsDEPRECATED @43 :Void;
    liveLocationTimingDEPRECATED @44 :Void;
    orbslamCorrectionDEPRECATED @45 :Void;
    liveLocationCorrectedDEPRECATED @46 :Void;
    orbObservationDEPRECATED @47 :Void;
    gpsLocationExternal @48 :Void;
    locationDEPRECATED @49 :Void;
    uiNavigationEventDEPRECATED @50 :Void;
    liveLocationKalmanLegacyDEPRECATED @51 :Void;
    testJoystick @52 :Void;
    orbOdometryDEPRECATED @53 :Void;
    orbFeaturesDEPRECATED @54 :Void;
    applanixLocationDEPRECATED @55 :Void;
    orbKeyFrameDEPRECATED @56 :Void;
    uiLayoutStateDEPRECATED @57 :Void;
    orbFeaturesSummaryDEPRECATED @58 :Void;
    driverStateDEPRECATED @59 :Void;
    boot @60 :Void;
    liveParameters @61 :Void;
    liveMapDataDEPRECATED @62 :Void;
    cameraOdometry @63 :CameraOdometry;  # which() = 62
    lateralPlanDEPRECATED @64 :Void;
    kalmanOdometryDEPRECATED @65 :Void;
    thumbnail @66 :Void;
    onroadEventsDEPRECATED @68 :Void;
    carParams @69 :CarParams;  # which() = 67
    driverCameraState @70 :FrameData;  # which() = 68
    driverMonitoringStateDEPRECATED @71 :Void;
    liveLocationKalmanDEPRECATED @72 :Void;
    sentinel @73 :Void;
    wideRoadCameraState @74 :FrameData;  # which() = 72
    modelV2 @75 :ModelDataV2;  # which() = 73
    driverEncodeIdx @76 :Void;
    wideRoadEncodeIdx @77 :Void;
    managerState @78 :Void;
    uploaderState @79 :Void;
    peripheralState @80 :Void;
    pandaStates @81 :Void;
    navInstruction @82 :Void;
    navRoute @83 :Void;
    navThumbnail @84 :Void;
    errorLogMessage @85 :Void;
    roadEncodeData @86 :Void;
    driverEncodeData @87 :Void;
    wideRoadEncodeData @88 :Void;
    qRoadEncodeData @89 :Void;
    qRoadEncodeIdx @90 :Void;
    gnssMeasurements @91 :Void;
    driverStateV2 @92 :Void;
    userFlag @93 :Void;
    liveTorqueParameters @94 :Void;
    magnetometer @95 :Void;
    lightSensor @96 :Void;
    temperatureSensor @97 :Void;
    accelerometer @98 :Void;
    gyroscope @99 :Void;
    gyroscope2 @100 :Void;
    accelerometer2 @101 :Void;
    uiDebug @102 :Void;
    microphone @103 :Void;
    navModelDEPRECATED @104 :Void;
    mapRenderState @105 :Void;
    uiPlanDEPRECATED @106 :Void;
    customReserved0 @107 :Void;
    customReserved1 @108 :Void;
    customReserved2 @109 :Void;
    customReserved3 @110 :Void;
    customReserved4 @111 :Void;
    customReserved5 @112 :Void;
    customReserved6 @113 :Void;
    customReserved7 @114 :Void;
    customReserved8 @115 :Void;
    customReserved9 @116 :Void;
    livestreamRoadEncodeIdx @117 :Void;
    livestreamWideRoadEncodeIdx @118 :Void;
    livestreamDriverEncodeIdx @119 :Void;
    livestreamRoadEncodeData @120 :Void;
    livestreamWideRoadEncodeData @121 :Void;
    livestreamDriverEncodeData @122 :Void;
    temperatureSensor2 @123 :Void;
    customReservedRawData0 @124 :Void;
    customReservedRawData1 @125 :Void;
    customReservedRawData2 @126 :Void;
    carOutput @127 :Void;
    drivingModelData @128 :DrivingModelData;  # which() = 126
    livePose @129 :Void;
    selfdriveState @130 :Void;
    liveTracks @131 :Void;
    driverAssistance @132 :Void;
    alertDebug @133 :Void;
    onroadEvents @134 :Void;
    touch @135 :Void;
    customReserved10 @136 :Void;
    customReserved11 @137 :Void;
    customReserved12 @138 :Void;
    customReserved13 @139 :Void;
    customReserved14 @140 :Void;
    customReserved15 @141 :Void;
    customReserved16 @142 :Void;
    customReserved17 @143 :Void;
    customReserved18 @144 :Void;
    customReserved19 @145 :Void;
    liveDelay @146 :LiveDelayData;  # which() = 144
    rawAudioData @147 :Void;
    bookmarkButton @148 :Void;
    audioFeedback @149 :Void;
    lateralManeuverPlan @150 :Void;
    driverMonitoringState @151 :DriverMonitoringState;  # which() = 149
  }
}

# The frames of one camera (road, wide or driver). Only the leading fields a replay needs are
# declared; ordinals 1, 3..7 are placeholders of openpilot's types.
struct FrameData {
  frameId @0 :UInt32;
  reserved1 @1 :UInt32;
  timestampEof @2 :UInt64;  # ns, end of frame
  reserved3 @3 :Int32;
  reserved4 @4 :Int32;
  reserved5 @5 :Int32;
  reserved6 @6 :Data;
  reserved7 @7 :UInt16;  # an enum in openpilot
  timestampSof @8 :UInt64;  # ns, start of frame
}

# Messages a replay may meet; their fields are not declared yet (add them with openpilot's
# ordinals when a reader needs them).
struct DeviceState {}
# The car's state: only the speed a replay feeds to the action is declared (ordinal 0 is
# openpilot's deprecated list of event names, an enum list).
struct CarState {
  reserved0 @0 :List(UInt16);
  vEgo @1 :Float32;  # m/s
}
struct CarControl {}

# The car's parameters (openpilot logs them once per route; its modeld reads them at start). Only
# the longitudinal actuator delay is read; every ordinal before it is a placeholder of openpilot's
# kind (Text, Bool, Float32, an enum as UInt16, lists and structs), so it lands where openpilot's
# does: byte 100 (tests/messages/test_layout.cpp).
struct CarParams {
  reserved0 @0 :Text;
  reserved1 @1 :Text;
  reserved2 @2 :Bool;
  reserved3 @3 :Bool;
  reserved4 @4 :Bool;
  reserved5 @5 :Bool;
  reserved6 @6 :Bool;
  reserved7 @7 :Float32;
  reserved8 @8 :Float32;
  reserved9 @9 :UInt16;  # an enum in openpilot
  reserved10 @10 :Int16;
  reserved11 @11 :List(Float32);
  reserved12 @12 :List(Float32);
  reserved13 @13 :List(Float32);
  reserved14 @14 :List(Float32);
  reserved15 @15 :List(Float32);
  reserved16 @16 :List(Float32);
  reserved17 @17 :Float32;
  reserved18 @18 :Float32;
  reserved19 @19 :Float32;
  reserved20 @20 :Float32;
  reserved21 @21 :Float32;
  reserved22 @22 :Float32;
  reserved23 @23 :Float32;
  reserved24 @24 :Float32;
  reserved25 @25 :Reserved;
  reservedUnion :union {  # a union of structs in openpilot (its @67 member is not declared)
    reserved26 @26 :Reserved;
    reserved27 @27 :Reserved;
    reserved40 @40 :Reserved;
  }
  reserved28 @28 :Bool;
  reserved29 @29 :Float32;
  reserved30 @30 :Bool;
  reserved31 @31 :Bool;
  reserved32 @32 :Float32;
  reserved33 @33 :Float32;
  reserved34 @34 :UInt16;  # an enum in openpilot
  reserved35 @35 :Bool;
  steerActuatorDelay @36 :Float32;  # s
  reserved37 @37 :Bool;
  reserved38 @38 :Text;
  reserved39 @39 :Bool;
  reserved41 @41 :Bool;
  reserved42 @42 :UInt16;  # an enum in openpilot
  reserved43 @43 :UInt16;  # an enum in openpilot
  reserved44 @44 :List(Reserved);
  reserved45 @45 :Float32;
  reserved46 @46 :Bool;
  reserved47 @47 :Float32;
  reserved48 @48 :Reserved;
  reserved49 @49 :UInt16;  # an enum in openpilot
  reserved50 @50 :UInt16;  # an enum in openpilot
  reserved51 @51 :Float32;
  reserved52 @52 :Float32;
  reserved53 @53 :Float32;
  reserved54 @54 :Float32;
  reserved55 @55 :Bool;
  reserved56 @56 :Bool;
  reserved57 @57 :Bool;
  longitudinalActuatorDelay @58 :Float32;  # s, gas and brake
}
struct DriverMonitoringState {}

struct LiveDelayData {
  lateralDelay @0 :Float32;  # s
  validBlocks @1 :Int32;
  status @2 :Status;

  enum Status {
    unestimated @0;
    estimated @1;
    invalid @2;
  }
}

# Calibration: where a replay reads rpyCalib (roll, pitch, yaw in rad) from.
struct LiveCalibrationData {
  reserved0 @0 :List(Float32);
  reserved1 @1 :Int8;
  calCycle @2 :Int32;
  calPerc @3 :Int8;
  extrinsicMatrix @4 :List(Float32);  # 3x4, row-major
  reserved5 @5 :List(Float32);
  reserved6 @6 :List(Float32);
  rpyCalib @7 :List(Float32);  # rad
  rpyCalibSpread @8 :List(Float32);  # rad
  validBlocks @9 :Int32;
  wideFromDeviceEuler @10 :List(Float32);  # rad
  calStatus @11 :Status;
  height @12 :List(Float32);  # m

  enum Status {
    uncalibrated @0;
    calibrated @1;
    invalid @2;
    recalibrating @3;
  }
}

# Time, position and their standard deviations of one predicted trajectory; device frame
# (x forward, y right, z down), metres and seconds. Lists have the same length (33 for the plan).
struct XYZTData {
  x @0 :List(Float32);
  y @1 :List(Float32);
  z @2 :List(Float32);
  t @3 :List(Float32);
  xStd @4 :List(Float32);
  yStd @5 :List(Float32);
  zStd @6 :List(Float32);
}

enum LaneChangeState {
  off @0;
  preLaneChange @1;
  laneChangeStarting @2;
  laneChangeFinishing @3;
}

enum LaneChangeDirection {
  none @0;
  left @1;
  right @2;
}

# The driving model's full output (openpilot's `modelV2` service).
struct ModelDataV2 {
  frameId @0 :UInt32;  # road (main) camera frame
  frameAge @1 :UInt32;  # frames between the frame and this message
  frameDropPerc @2 :Float32;  # %, smoothed
  timestampEof @3 :UInt64;  # ns, end of the main frame

  position @4 :XYZTData;  # m
  orientation @5 :XYZTData;  # rad (euler)
  velocity @6 :XYZTData;  # m/s
  orientationRate @7 :XYZTData;  # rad/s
  laneLines @8 :List(XYZTData);  # 4: far left, left, right, far right
  laneLineProbs @9 :List(Float32);
  roadEdges @10 :List(XYZTData);  # 2: left, right
  leads @11 :List(Reserved);  # openpilot's older lead format (LeadDataV2), not written
  meta @12 :MetaData;
  laneLineStds @13 :List(Float32);
  roadEdgeStds @14 :List(Float32);
  modelExecutionTime @15 :Float32;  # s
  rawPredictions @16 :Data;
  leadsV3 @18 :List(LeadDataV3);  # 3, at t = 0, 2, 4 s
  acceleration @19 :XYZTData;  # m/s^2
  frameIdExtra @20 :UInt32;  # wide camera frame
  confidence @23 :ConfidenceClass;
  lateralPlannerSolutionDEPRECATED @25 :Reserved;
  action @26 :Action;

  # openpilot's deprecated fields, grouped as its current schema groups them (a group changes
  # no offset: its members are laid out by ordinal like any other field). Never written.
  deprecated :group {
    temporalPose @21 :Reserved;
    gpuExecutionTime @17 :Float32;  # s
    navEnabled @22 :Bool;
    locationMonoTime @24 :UInt64;
  }

  struct LeadDataV3 {
    prob @0 :Float32;  # probability there is a lead at probTime
    probTime @1 :Float32;  # s
    t @2 :List(Float32);  # s
    x @3 :List(Float32);  # m
    xStd @4 :List(Float32);
    y @5 :List(Float32);  # m
    yStd @6 :List(Float32);
    v @7 :List(Float32);  # m/s
    vStd @8 :List(Float32);
    a @9 :List(Float32);  # m/s^2
    aStd @10 :List(Float32);
  }

  struct MetaData {
    engagedProb @0 :Float32;
    desirePrediction @1 :List(Float32);  # 4 horizons x 8 desires
    reserved2 @2 :Float32;
    reserved3 @3 :Float32;
    reserved4 @4 :Float32;
    desireState @5 :List(Float32);  # 8
    disengagePredictions @6 :DisengagePredictions;
    hardBrakePredicted @7 :Bool;
    laneChangeState @8 :LaneChangeState;
    laneChangeDirection @9 :LaneChangeDirection;
  }

  # Probabilities at t (2, 4, 6, 8, 10 s); the press ones have a sixth entry at 0 s first.
  struct DisengagePredictions {
    t @0 :List(Float32);
    brakeDisengageProbs @1 :List(Float32);
    gasDisengageProbs @2 :List(Float32);
    steerOverrideProbs @3 :List(Float32);
    brake3MetersPerSecondSquaredProbs @4 :List(Float32);
    brake4MetersPerSecondSquaredProbs @5 :List(Float32);
    brake5MetersPerSecondSquaredProbs @6 :List(Float32);
    gasPressProbs @7 :List(Float32);
    brakePressProbs @8 :List(Float32);
  }

  enum ConfidenceClass {
    red @0;
    yellow @1;
    green @2;
  }

  # What the car should do now, derived from the plan and the car's delays.
  struct Action {
    desiredCurvature @0 :Float32;  # 1/m
    desiredAcceleration @1 :Float32;  # m/s^2
    shouldStop @2 :Bool;
  }
}

# The compact subset of the model output that controls use (openpilot's `drivingModelData`).
struct DrivingModelData {
  frameId @0 :UInt32;
  frameIdExtra @1 :UInt32;
  action @2 :ModelDataV2.Action;
  laneLineMeta @3 :LaneLineMeta;
  meta @4 :MetaData;
  path @5 :PolyPath;
  frameDropPerc @6 :Float32;  # %
  modelExecutionTime @7 :Float32;  # s

  # Degree-4 polynomials of the plan's position over time; coefficients in increasing power.
  struct PolyPath {
    xCoefficients @0 :List(Float32);
    yCoefficients @1 :List(Float32);
    zCoefficients @2 :List(Float32);
  }

  struct LaneLineMeta {
    leftY @0 :Float32;  # m, lateral offset of the left lane line at the first point
    rightY @1 :Float32;
    leftProb @2 :Float32;
    rightProb @3 :Float32;
  }

  struct MetaData {
    laneChangeState @0 :LaneChangeState;
    laneChangeDirection @1 :LaneChangeDirection;
  }
}

# Ego motion between frames as the vision network sees it (openpilot's `cameraOdometry`).
struct CameraOdometry {
  trans @0 :List(Float32);  # m/s, device frame
  rot @1 :List(Float32);  # rad/s, device frame
  transStd @2 :List(Float32);
  rotStd @3 :List(Float32);
  frameId @4 :UInt32;
  timestampEof @5 :UInt64;  # ns
  wideFromDeviceEuler @6 :List(Float32);  # rad
  wideFromDeviceEulerStd @7 :List(Float32);
  roadTransformTrans @8 :List(Float32);  # m
  roadTransformTransStd @9 :List(Float32);
}
