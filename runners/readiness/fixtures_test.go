package readiness

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/facts"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json from the fake hosts")

// smartLog2 prints smart-log JSON as nvme-cli 2.x does (json-c, pretty).
func smartLog2(cw, tempK, spare, used, mediaErrors, powerOnHours int) string {
	return fmt.Sprintf(`{
  "critical_warning":%d,
  "temperature":%d,
  "avail_spare":%d,
  "spare_thresh":10,
  "percent_used":%d,
  "endurance_grp_critical_warning_summary":0,
  "data_units_read":184467351,
  "data_units_written":92233718,
  "host_read_commands":3892847193,
  "host_write_commands":1184526731,
  "controller_busy_time":1840,
  "power_cycles":41,
  "power_on_hours":%d,
  "unsafe_shutdowns":7,
  "media_errors":%d,
  "num_err_log_entries":%d,
  "warning_temp_time":0,
  "critical_comp_time":0,
  "thm_temp1_trans_count":0,
  "thm_temp2_trans_count":0,
  "thm_temp1_total_time":0,
  "thm_temp2_total_time":0
}
`, cw, tempK, spare, used, powerOnHours, mediaErrors, mediaErrors)
}

// smartLog1 prints smart-log JSON as nvme-cli 1.x does ("key" : value).
func smartLog1(cw, tempK, spare, used, mediaErrors, powerOnHours int) string {
	return fmt.Sprintf(`{
  "critical_warning" : %d,
  "temperature" : %d,
  "avail_spare" : %d,
  "spare_thresh" : 10,
  "percent_used" : %d,
  "endurance_grp_critical_warning_summary" : 0,
  "data_units_read" : 2914856213,
  "data_units_written" : 3318810242,
  "host_read_commands" : 41871633219,
  "host_write_commands" : 53120870135,
  "controller_busy_time" : 98237,
  "power_cycles" : 63,
  "power_on_hours" : %d,
  "unsafe_shutdowns" : 19,
  "media_errors" : %d,
  "num_err_log_entries" : %d,
  "warning_temp_time" : 412,
  "critical_comp_time" : 0,
  "temperature_sensor_1" : %d,
  "thm_temp1_trans_count" : 0,
  "thm_temp2_trans_count" : 0,
  "thm_temp1_total_time" : 0,
  "thm_temp2_total_time" : 0
}
`, cw, tempK, spare, used, powerOnHours, mediaErrors, mediaErrors*3, tempK)
}

func osRelease(pretty, name, id, version string) string {
	return fmt.Sprintf("PRETTY_NAME=%q\nNAME=%q\nVERSION_ID=%q\nID=%s\n", pretty, name, version, id)
}

// rdmaGPUHost is an NVMe-oF RDMA host with GPUs: Ubuntu 24.04, two
// ConnectX-7 ports at MTU 9000 on separate sockets, each reaching the
// array's subsystem through its own controller (ANA optimized and
// non-optimized, round-robin policy), PFC and ECN on priority 3, two H100
// NVL with nvidia-fs loaded and cufile.json present, plus a local boot drive.
func rdmaGPUHost() *fakeHost {
	h := newFakeHost("gpu-rdma-01")
	h.file("/etc/os-release", osRelease("Ubuntu 24.04.1 LTS", "Ubuntu", "ubuntu", "24.04"))
	h.uname("6.8.0-49-generic", "#49-Ubuntu SMP PREEMPT_DYNAMIC Mon Nov  4 02:06:24 UTC 2024")
	h.cpu("GenuineIntel", "Intel(R) Xeon(R) Gold 6426Y", "6", "143", 2, 16, 2, []string{"0-15,32-47", "16-31,48-63"}, "performance")
	h.meminfo(1056375808, 1012345678)
	h.attr("/sys/module/nvme_core/parameters/multipath", "Y")
	h.dir("/sys/class/infiniband/mlx5_0")
	h.dir("/sys/class/infiniband/mlx5_1")
	const arrayNQN = "nqn.2014-08.com.example:array.x900.7b2d40a1"
	h.controllers([]ctrlSpec{
		{name: "nvme0", transport: "pcie", address: "0000:c3:00.0", nqn: "nqn.1994-11.com.samsung:nvme:PM9A3:M.2:S665NE0T812345", model: "SAMSUNG MZ1L2960HCJR-00A07", serial: "S665NE0T812345", fw: "GDC7302Q", state: "live", numa: "1", queues: 65,
			smart: smartLog2(0, 311, 100, 2, 0, 9312)},
		{name: "nvme1", transport: "rdma", address: "traddr=192.168.10.100,trsvcid=4420", nqn: arrayNQN, model: "Array X900", serial: "7B2D40A1C9E35F10", fw: "6.5.6", state: "live", numa: "0", queues: 65,
			smart: smartLog2(0, 0, 100, 0, 0, 0)},
		{name: "nvme2", transport: "rdma", address: "traddr=192.168.20.100,trsvcid=4420", nqn: arrayNQN, model: "Array X900", serial: "7B2D40A1C9E35F10", fw: "6.5.6", state: "live", numa: "1", queues: 65,
			smart: smartLog2(0, 0, 100, 0, 0, 0)},
	})
	h.subsystem("nvme-subsys0", "nqn.1994-11.com.samsung:nvme:PM9A3:M.2:S665NE0T812345", "SAMSUNG MZ1L2960HCJR-00A07", "numa", "nvme0")
	h.subsystem("nvme-subsys1", arrayNQN, "Array X900", "round-robin", "nvme1", "nvme2")
	h.namespace("nvme0n1", "[none] mq-deadline", nil)
	h.namespace("nvme1n1", "none", [][3]string{{"nvme1c1n1", "optimized", "[none] mq-deadline"}, {"nvme1c2n1", "non-optimized", "[none] mq-deadline"}})
	h.namespace("nvme1n2", "none", [][3]string{{"nvme1c1n2", "non-optimized", "[none] mq-deadline"}, {"nvme1c2n2", "optimized", "[none] mq-deadline"}})
	h.cmd([]string{"nvme", "list", "-o", "json"}, `{
  "Devices":[
    {"NameSpace":1,"DevicePath":"/dev/nvme0n1","GenericPath":"/dev/ng0n1","Firmware":"GDC7302Q","ModelNumber":"SAMSUNG MZ1L2960HCJR-00A07","SerialNumber":"S665NE0T812345","UsedBytes":312811323392,"MaximumLBA":937703088,"PhysicalSize":480103981056,"SectorSize":512},
    {"NameSpace":1,"DevicePath":"/dev/nvme1n1","GenericPath":"/dev/ng1n1","Firmware":"6.5.6","ModelNumber":"Array X900","SerialNumber":"7B2D40A1C9E35F10","UsedBytes":2199023255552,"MaximumLBA":4294967296,"PhysicalSize":2199023255552,"SectorSize":512},
    {"NameSpace":2,"DevicePath":"/dev/nvme1n2","GenericPath":"/dev/ng1n2","Firmware":"6.5.6","ModelNumber":"Array X900","SerialNumber":"7B2D40A1C9E35F10","UsedBytes":2199023255552,"MaximumLBA":4294967296,"PhysicalSize":2199023255552,"SectorSize":512}
  ]
}
`)
	h.cmd([]string{"nvme", "list-subsys", "-o", "json"}, `[
  {
    "HostNQN":"nqn.2014-08.org.nvmexpress:uuid:4c4c4544-0047-3610-8031-b4c04f4e3533",
    "HostID":"4c4c4544-0047-3610-8031-b4c04f4e3533",
    "Subsystems":[
      {"Name":"nvme-subsys0","NQN":"nqn.1994-11.com.samsung:nvme:PM9A3:M.2:S665NE0T812345","IOPolicy":"numa",
       "Paths":[{"Name":"nvme0","Transport":"pcie","Address":"0000:c3:00.0","State":"live"}]},
      {"Name":"nvme-subsys1","NQN":"nqn.2014-08.com.example:array.x900.7b2d40a1","IOPolicy":"round-robin",
       "Paths":[{"Name":"nvme1","Transport":"rdma","Address":"traddr=192.168.10.100,trsvcid=4420","State":"live"},
                {"Name":"nvme2","Transport":"rdma","Address":"traddr=192.168.20.100,trsvcid=4420","State":"live"}]}
    ]
  }
]
`)
	h.cmd([]string{"nvme", "version"}, "nvme version 2.8 (git 2.8)\nlibnvme version 1.8 (git 1.8)\n")
	h.nics([]nicSpec{
		{name: "eno8303", mac: "b0:7b:25:d1:0a:4e", driver: "tg3", pci: "0000:04:00.0", vendor: "0x14e4", device: "0x165f", numa: "0", mtu: 1500, speed: 1000, up: true, addrs: []string{"10.20.0.21/24"}},
		{name: "ens1f0np0", mac: "a0:88:c2:3e:11:f0", driver: "mlx5_core", pci: "0000:17:00.0", vendor: "0x15b3", device: "0x1021", numa: "0", mtu: 9000, speed: 200000, up: true,
			addrs: []string{"192.168.10.11/24"}, pfc: pfcJSON(3), ecnPrios: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{name: "ens5f0np0", mac: "a0:88:c2:3e:52:a0", driver: "mlx5_core", pci: "0000:97:00.0", vendor: "0x15b3", device: "0x1021", numa: "1", mtu: 9000, speed: 200000, up: true,
			addrs: []string{"192.168.20.11/24"}, pfc: pfcJSON(3), ecnPrios: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{name: "lo", mac: "00:00:00:00:00:00", mtu: 65536, up: true, addrs: []string{"127.0.0.1/8", "::1/128"}, linkType: "loopback"},
	})
	h.cmd([]string{"rdma", "-j", "link"}, `[{"ifindex":0,"ifname":"mlx5_0","port":1,"state":"ACTIVE","physical_state":"LINK_UP","netdev":"ens1f0np0","netdev_index":3},{"ifindex":1,"ifname":"mlx5_1","port":1,"state":"ACTIVE","physical_state":"LINK_UP","netdev":"ens5f0np0","netdev_index":4}]`+"\n")
	h.modules(
		"nvidia_fs 262144 0 - Live 0x0000000000000000 (OE)",
		"nvidia_uvm 4956160 4 - Live 0x0000000000000000 (OE)",
		"nvidia 54685696 132 nvidia_fs,nvidia_uvm, Live 0x0000000000000000 (OE)",
		"nvme_rdma 53248 4 - Live 0x0000000000000000",
		"nvme_fabrics 36864 1 nvme_rdma, Live 0x0000000000000000",
		"mlx5_ib 495616 0 - Live 0x0000000000000000",
		"ib_uverbs 200704 2 nvidia_fs,mlx5_ib, Live 0x0000000000000000",
		"mlx5_core 2416640 1 mlx5_ib, Live 0x0000000000000000",
		"nvme 61440 2 - Live 0x0000000000000000",
		"nvme_core 212992 7 nvme_rdma,nvme_fabrics,nvme, Live 0x0000000000000000",
	)
	h.gpus("550.127.05", [][4]string{
		{"NVIDIA H100 NVL", "GPU-5c1d1f3a-8e2b-4d7c-9a60-1f2e3d4c5b6a", "00000000:1B:00.0", "95830"},
		{"NVIDIA H100 NVL", "GPU-9e8d7c6b-5a49-4382-b1c0-d9e8f7a6b5c4", "00000000:9B:00.0", "95830"},
	})
	h.gpuNode("00000000:1B:00.0", "0")
	h.gpuNode("00000000:9B:00.0", "1")
	// nvidia-smi topo -m in the layout of the recorded H100 matrix in
	// runners/probe/gpu/testdata (NICs numbered, with a NIC legend).
	h.cmd([]string{"nvidia-smi", "topo", "-m"}, "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"+
		"GPU0\t X \tSYS\tPXB\tSYS\t0-15,32-47\t0\t\tN/A\n"+
		"GPU1\tSYS\t X \tSYS\tPXB\t16-31,48-63\t1\t\tN/A\n"+
		"NIC0\tPXB\tSYS\t X \tSYS\t\t\t\t\n"+
		"NIC1\tSYS\tPXB\tSYS\t X \t\t\t\t\n\n"+
		"Legend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n\n"+
		"NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n")
	h.file("/proc/driver/nvidia-fs/stats", `GDS Version: 1.11.1.6 
NVFS statistics(ver: 4.0)
NVFS Driver(version: 2.22.3)
Mellanox PeerDirect Supported: True
IO stats: Disabled, peer IO stats: Disabled
Logging level: info

Active Shadow-Buffer (MiB): 0
Active Process: 0
Reads				: err=0 io_state_err=0
Sparse Reads			: n=0 io=0 holes=0 pages=0 
Writes				: err=0 io_state_err=0 pg-cache=0 pg-cache-fail=0 pg-cache-eio=0
Mmap				: n=0 ok=0 err=0 munmap=0
Bar1-map			: n=0 ok=0 err=0 free=0 callbacks=0 active=0 delay-frees=0
Error				: cpu-gpu-pages=0 sg-ext=0 dma-map=0 dma-ref=0
Ops				: Read=0 Write=0 BatchIO=0
`)
	h.file("/etc/cufile.json", `{
    // NOTE : Application can override custom configuration via export CUFILE_ENV_PATH_JSON=<filepath>
    // e.g : export CUFILE_ENV_PATH_JSON="/home/<xxx>/cufile.json"

    "logging": {
        // log directory, if not enabled will create log file under current working directory
        //"dir": "/home/<xxxx>",
        // NOTICE|ERROR|WARN|INFO|DEBUG|TRACE (in decreasing order of severity)
        "level": "ERROR"
    },

    "profile": {
        // nvtx profiling on/off
        "nvtx": false,
        // cufile stats level(0-3)
        "cufile_stats": 0
    },

    "execution" : {
        // max number of workitems in the queue;
        "max_io_queue_depth": 128,
        // max number of host threads per gpu to spawn for parallel IO
        "max_io_threads" : 4,
        // enable support for parallel IO
        "parallel_io" : true,
        // minimum IO threshold before splitting the IO
        "min_io_threshold_size_kb" : 8192,
        // maximum parallelism for a single request
        "max_request_parallelism" : 4
    },

    "properties": {
        // max IO chunk size (parameter should be multiples of 64K) used by cuFileRead/Write internally per IO request
        "max_direct_io_size_kb" : 16384,
        // device memory size (parameter should be 4K aligned) for reserving bounce buffers for the entire GPU
        "max_device_cache_size_kb" : 131072,
        // limit on maximum device memory size (parameter should be 4K aligned) that can be pinned for a given process
        "max_device_pinned_mem_size_kb" : 33554432,
        // true or false (true will enable asynchronous io submission to nvidia-fs driver)
        "use_poll_mode" : false,
        // maximum IO request size (parameter should be 4K aligned) within or equal to which library will use polling for IO completion
        "poll_mode_max_size_kb": 4,
        // allow compat mode, this will enable use of cuFile posix read/writes
        "allow_compat_mode": true,
        // client-side rdma addr list for user-space file-systems(e.g ["10.0.1.0", "10.0.2.0"])
        "rdma_dev_addr_list": [ "192.168.10.11", "192.168.20.11" ]
    }
}
`)
	h.cmd([]string{"fio", "--version"}, "fio-3.36\n")
	h.cmd([]string{"tc", "-V"}, "tc utility, iproute2-6.1.0, libbpf 1.3.0\n")
	return h
}

// tcpHost is an NVMe-oF TCP host without GPU: RHEL 9.4 (kernel 5.14),
// two E810 ports at MTU 1500, the array's subsystem reached through two
// controllers connected with 8 I/O queues, numa I/O policy, one path
// inaccessible and bfq on it, powersave governor, and fio not installed.
func tcpHost() *fakeHost {
	h := newFakeHost("tcp-lab-07")
	h.file("/etc/os-release", osRelease("Red Hat Enterprise Linux 9.4 (Plow)", "Red Hat Enterprise Linux", "\"rhel\"", "9.4"))
	h.uname("5.14.0-427.13.1.el9_4.x86_64", "#1 SMP PREEMPT_DYNAMIC Wed Apr 10 10:29:16 EDT 2024")
	h.cpu("GenuineIntel", "Intel(R) Xeon(R) Silver 4314 CPU @ 2.40GHz", "6", "106", 2, 16, 2, []string{"0-15,32-47", "16-31,48-63"}, "powersave")
	h.meminfo(528012340, 498765432)
	h.attr("/sys/module/nvme_core/parameters/multipath", "Y")
	const arrayNQN = "nqn.2014-08.com.example:array.t400.e3f09c21"
	h.controllers([]ctrlSpec{
		{name: "nvme0", transport: "tcp", address: "traddr=10.10.1.100,trsvcid=4420,src_addr=10.10.1.21", nqn: arrayNQN, model: "Array T400", serial: "E3F09C21AB774D02", fw: "3.2.1", state: "live", numa: "-1", queues: 9,
			smart: smartLog2(0, 0, 100, 0, 0, 0)},
		{name: "nvme1", transport: "tcp", address: "traddr=10.10.2.100,trsvcid=4420,src_addr=10.10.2.21", nqn: arrayNQN, model: "Array T400", serial: "E3F09C21AB774D02", fw: "3.2.1", state: "live", numa: "-1", queues: 9,
			smart: smartLog2(0, 0, 100, 0, 0, 0)},
	})
	h.subsystem("nvme-subsys0", arrayNQN, "Array T400", "numa", "nvme0", "nvme1")
	h.namespace("nvme0n1", "none", [][3]string{{"nvme0c0n1", "optimized", "[mq-deadline] kyber bfq none"}, {"nvme0c1n1", "inaccessible", "mq-deadline kyber [bfq] none"}})
	h.cmd([]string{"nvme", "list", "-o", "json"}, `{
  "Devices":[
    {"NameSpace":1,"DevicePath":"/dev/nvme0n1","GenericPath":"/dev/ng0n1","Firmware":"3.2.1","ModelNumber":"Array T400","SerialNumber":"E3F09C21AB774D02","UsedBytes":1099511627776,"MaximumLBA":2147483648,"PhysicalSize":1099511627776,"SectorSize":512}
  ]
}
`)
	h.cmd([]string{"nvme", "list-subsys", "-o", "json"}, `[
  {
    "HostNQN":"nqn.2014-08.org.nvmexpress:uuid:30393137-3136-4d32-3233-313230303132",
    "HostID":"30393137-3136-4d32-3233-313230303132",
    "Subsystems":[
      {"Name":"nvme-subsys0","NQN":"nqn.2014-08.com.example:array.t400.e3f09c21","IOPolicy":"numa",
       "Paths":[{"Name":"nvme0","Transport":"tcp","Address":"traddr=10.10.1.100,trsvcid=4420,src_addr=10.10.1.21","State":"live"},
                {"Name":"nvme1","Transport":"tcp","Address":"traddr=10.10.2.100,trsvcid=4420,src_addr=10.10.2.21","State":"live"}]}
    ]
  }
]
`)
	h.cmd([]string{"nvme", "version"}, "nvme version 2.6 (git 2.6)\nlibnvme version 1.6 (git 1.6)\n")
	h.nics([]nicSpec{
		{name: "eno1", mac: "3c:ec:ef:41:8a:10", driver: "igb", pci: "0000:02:00.0", vendor: "0x8086", device: "0x1521", numa: "0", mtu: 1500, speed: 1000, up: true, addrs: []string{"10.20.0.57/24"}},
		{name: "ens3f0", mac: "b4:96:91:d2:07:c8", driver: "ice", pci: "0000:98:00.0", vendor: "0x8086", device: "0x159b", numa: "1", mtu: 1500, speed: 25000, up: true,
			addrs: []string{"10.10.1.21/24"}, pfc: pfcJSON()},
		{name: "ens3f1", mac: "b4:96:91:d2:07:c9", driver: "ice", pci: "0000:98:00.1", vendor: "0x8086", device: "0x159b", numa: "1", mtu: 1500, speed: 25000, up: true,
			addrs: []string{"10.10.2.21/24"}, pfc: pfcJSON()},
		{name: "lo", mac: "00:00:00:00:00:00", mtu: 65536, up: true, addrs: []string{"127.0.0.1/8"}, linkType: "loopback"},
	})
	h.cmdResult([]string{"rdma", "-j", "link"}, fakeOutput{stderr: "Failed to open NETLINK_RDMA socket\n", code: 1})
	h.modules(
		"nvme_tcp 57344 4 - Live 0x0000000000000000",
		"nvme_fabrics 36864 1 nvme_tcp, Live 0x0000000000000000",
		"nvme_core 200704 6 nvme_tcp,nvme_fabrics, Live 0x0000000000000000",
		"ice 1097728 0 - Live 0x0000000000000000",
	)
	h.cmd([]string{"tc", "-V"}, "tc utility, iproute2-6.2.0, libbpf 1.3.0\n")
	return h
}

// failingSSDHost is a local-NVMe host with one GPU and no GDS whose second
// drive fails: critical warning 0x04 (reliability degraded), 37 media
// errors, 97 % endurance used, 72 °C; bfq on its namespace and 32 I/O
// queues for 64 CPUs. Ubuntu 22.04 with nvme-cli 1.16's JSON.
func failingSSDHost() *fakeHost {
	h := newFakeHost("kv-local-03")
	h.file("/etc/os-release", osRelease("Ubuntu 22.04.4 LTS", "Ubuntu", "ubuntu", "22.04"))
	h.uname("5.15.0-105-generic", "#115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024")
	h.cpu("AuthenticAMD", "AMD EPYC 7543 32-Core Processor", "25", "1", 1, 32, 2, []string{"0-63"}, "performance")
	h.meminfo(527989172, 501234567)
	h.attr("/sys/module/nvme_core/parameters/multipath", "Y")
	h.controllers([]ctrlSpec{
		{name: "nvme0", transport: "pcie", address: "0000:41:00.0", nqn: "nqn.1994-11.com.samsung:nvme:PM9A3:2.5-inch:S64HNE0R901234", model: "SAMSUNG MZQL23T8HCLS-00A07", serial: "S64HNE0R901234", fw: "GDC5602Q", state: "live", numa: "0", queues: 65,
			smart: smartLog1(0, 308, 100, 1, 0, 18211)},
		{name: "nvme1", transport: "pcie", address: "0000:42:00.0", nqn: "nqn.2019-10.com.kioxia:KCD6XLUL3T84:X1R0A0Z2T7XX", model: "KIOXIA KCD6XLUL3T84", serial: "X1R0A0Z2T7XX", fw: "0106", state: "live", numa: "0", queues: 33,
			smart: smartLog1(4, 345, 3, 97, 37, 39120)},
	})
	h.subsystem("nvme-subsys0", "nqn.1994-11.com.samsung:nvme:PM9A3:2.5-inch:S64HNE0R901234", "SAMSUNG MZQL23T8HCLS-00A07", "numa", "nvme0")
	h.subsystem("nvme-subsys1", "nqn.2019-10.com.kioxia:KCD6XLUL3T84:X1R0A0Z2T7XX", "KIOXIA KCD6XLUL3T84", "numa", "nvme1")
	h.namespace("nvme0n1", "[none] mq-deadline", nil)
	h.namespace("nvme1n1", "mq-deadline kyber [bfq] none", nil)
	h.cmd([]string{"nvme", "list", "-o", "json"}, `{
  "Devices" : [
    {
      "NameSpace" : 1,
      "DevicePath" : "/dev/nvme0n1",
      "Firmware" : "GDC5602Q",
      "Index" : 0,
      "ModelNumber" : "SAMSUNG MZQL23T8HCLS-00A07",
      "SerialNumber" : "S64HNE0R901234",
      "UsedBytes" : 3840755982336,
      "MaximumLBA" : 7501476528,
      "PhysicalSize" : 3840755982336,
      "SectorSize" : 512
    },
    {
      "NameSpace" : 1,
      "DevicePath" : "/dev/nvme1n1",
      "Firmware" : "0106",
      "Index" : 1,
      "ModelNumber" : "KIOXIA KCD6XLUL3T84",
      "SerialNumber" : "X1R0A0Z2T7XX",
      "UsedBytes" : 3840755982336,
      "MaximumLBA" : 7501476528,
      "PhysicalSize" : 3840755982336,
      "SectorSize" : 512
    }
  ]
}
`)
	h.cmd([]string{"nvme", "list-subsys", "-o", "json"}, `{
  "Subsystems" : [
    {
      "Name" : "nvme-subsys0",
      "NQN" : "nqn.1994-11.com.samsung:nvme:PM9A3:2.5-inch:S64HNE0R901234"
    },
    {
      "Paths" : [
        {
          "Name" : "nvme0",
          "Transport" : "pcie",
          "Address" : "0000:41:00.0",
          "State" : "live"
        }
      ]
    },
    {
      "Name" : "nvme-subsys1",
      "NQN" : "nqn.2019-10.com.kioxia:KCD6XLUL3T84:X1R0A0Z2T7XX"
    },
    {
      "Paths" : [
        {
          "Name" : "nvme1",
          "Transport" : "pcie",
          "Address" : "0000:42:00.0",
          "State" : "live"
        }
      ]
    }
  ]
}
`)
	h.cmd([]string{"nvme", "version"}, "nvme version 1.16\n")
	h.nics([]nicSpec{
		{name: "eno1np0", mac: "bc:97:e1:5a:20:f0", driver: "bnxt_en", pci: "0000:c1:00.0", vendor: "0x14e4", device: "0x16d7", numa: "0", mtu: 1500, speed: 25000, up: true, addrs: []string{"10.20.0.83/24"}},
		{name: "lo", mac: "00:00:00:00:00:00", mtu: 65536, up: true, addrs: []string{"127.0.0.1/8"}, linkType: "loopback"},
	})
	h.cmdResult([]string{"rdma", "-j", "link"}, fakeOutput{stderr: "Failed to open NETLINK_RDMA socket\n", code: 1})
	h.modules(
		"nvidia_uvm 1536000 0 - Live 0x0000000000000000 (POE)",
		"nvidia 56799232 19 nvidia_uvm, Live 0x0000000000000000 (POE)",
		"nvme 49152 4 - Live 0x0000000000000000",
		"nvme_core 147456 6 nvme, Live 0x0000000000000000",
	)
	h.gpus("535.161.08", [][4]string{{"NVIDIA L40S", "GPU-0f3e2d1c-4b5a-6978-8a9b-0c1d2e3f4a5b", "00000000:81:00.0", "46068"}})
	h.gpuNode("00000000:81:00.0", "0")
	h.cmd([]string{"fio", "--version"}, "fio-3.28\n")
	h.cmd([]string{"tc", "-V"}, "tc utility, iproute2-5.15.0, libbpf 0.5.0\n")
	return h
}

var fixtureHosts = map[string]func() *fakeHost{
	"rdma-gpu":    rdmaGPUHost,
	"tcp-nogpu":   tcpHost,
	"failing-ssd": failingSSDHost,
}

// TestFixturesMatchCollector regenerates each fixture by running the real
// collector against its fake host and compares it with testdata; -update
// rewrites testdata.
func TestFixturesMatchCollector(t *testing.T) {
	t.Parallel()
	for name, host := range fixtureHosts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := host().collect(t)
			got, err := json.MarshalIndent(f, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			path := filepath.Join("testdata", name+".json")
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./runners/readiness -run TestFixturesMatchCollector -update")
			require.JSONEq(t, string(want), string(got), "the collector's output changed: review it and run with -update")
		})
	}
}

// loadFixture reads a committed facts document.
func loadFixture(t testing.TB, name string) *facts.Facts {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	var f facts.Facts
	require.NoError(t, json.Unmarshal(b, &f))
	return &f
}
