-- The integration plan's GPU-path step judges any vendor's accelerator
-- driver, not only NVIDIA's, and its host step checks the PCIe links
-- (host.pcie-links). Plans seeded before say otherwise; bring them up to
-- date where nobody changed them: descriptions are not editable, so an
-- old one is replaced; the host step gains the check only where its
-- checks are still exactly the ones it was seeded with (an engineer who
-- chose others keeps them).
UPDATE plan_steps
SET description = 'The accelerators'' driver, whatever their vendor (its tool lists every device), and, on NVIDIA GPUs, GPUDirect Storage, so that reads reach accelerator memory the way production will; a gpu-path step measures the path.'
WHERE kind = 'gpu-path'
  AND description = 'NVIDIA driver and GPUDirect Storage, so that reads reach GPU memory the way production will.';

UPDATE plan_steps
SET description = 'Kernel, NVMe initiator modules, CPU frequency governor, NUMA placement of NIC, NVMe and GPU, PCIe links at their full speed and width, and the tools the runs need.'
WHERE kind = 'host'
  AND description = 'Kernel, NVMe initiator modules, CPU frequency governor, NUMA placement of NIC, NVMe and GPU, and the tools the runs need.';

INSERT INTO plan_step_checks (step_id, check_id)
SELECT ps.id, 'host.pcie-links'
FROM plan_steps ps
WHERE ps.kind = 'host'
  AND (SELECT array_agg(c.check_id ORDER BY c.check_id) FROM plan_step_checks c WHERE c.step_id = ps.id)
      = ARRAY['host.cpufreq', 'host.initiator-modules', 'host.kernel', 'host.numa-locality', 'tools.fio', 'tools.nvme-cli']::text[];
