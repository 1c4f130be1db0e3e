"""The traffic classes the suite configures on NICs and switches: RoCE data and CNPs."""

#: DSCP 26 (AF31) -> priority 3, the lossless RoCE class; ToS = DSCP << 2 | ECT(0) = 106
#: (NVIDIA RoCE guides; nccl-roce.md 2 and 5.4).
ROCE_DSCP, ROCE_PRIO, CNP_DSCP, CNP_PRIO = 26, 3, 48, 6
NCCL_IB_TC = (ROCE_DSCP << 2) | 2
