package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// The seed walkthrough ("Secure code execution in LlamaIndex with Azure
// Container Apps dynamic sessions"): its questions and the model's turns,
// replayed verbatim. The tool calls run for real; only the model is replayed.

const (
	questionTime    = "Tell me the current time in Seattle."
	questionHighest = "Find the highest temperature in the file that I uploaded."
	questionSort    = "Rearrange the temperature data in a descending order and save it back to the original csv file."
)

const (
	codeSeattle    = "from datetime import datetime, timedelta; import pytz; utc_now = datetime.now(pytz.utc); seattle_time = utc_now.astimezone(pytz.timezone('America/Los_Angeles')); seattle_time.strftime('%Y-%m-%d %H:%M:%S %Z%z')"
	codeHighest    = "import csv\n\nwith open('/mnt/data/TemperatureData.csv', 'r') as f:\n    reader = csv.reader(f)\n    next(reader)\n    highest_temp = float('-inf')\n    for row in reader:\n        temp = float(row[1])\n        if temp > highest_temp:\n            highest_temp = temp\nprint(highest_temp)"
	codeSortBroken = "import pandas as pd\n\ndf = pd.read_csv('/mnt/data/TemperatureData.csv')\ndf_sorted = df.sort_values(by='Temperature', ascending=False)\ndf_sorted.to_csv('/mnt/data/TemperatureData.csv', index=False)\n'filename': 'TemperatureData.csv'"
	codeSortFixed  = "import pandas as pd\n\ndf = pd.read_csv('/mnt/data/TemperatureData.csv')\ndf_sorted = df.sort_values(by='Temperature', ascending=False)\ndf_sorted.to_csv('/mnt/data/TemperatureData.csv', index=False)"
)

// turn is one replayed model turn: a thought and a tool call.
type turn struct {
	Thought string
	Action  string
	Args    map[string]string
}

// replayScript is what the model did for each question, and how it phrased
// its answer from the last observation.
type replayScript struct {
	Turns  []turn
	Answer func(last map[string]any) string
}

var seedReplay = map[string]replayScript{
	questionTime: {
		Turns: []turn{{
			Thought: "To provide the current time in Seattle, I need to calculate it based on the current UTC time and adjust for Seattle's time zone, which is Pacific Daylight Time (PDT) during daylight saving time and Pacific Standard Time (PST) outside of daylight saving time. PDT is UTC-7, and PST is UTC-8. I can use the code interpreter tool to get the current UTC time and adjust it accordingly.",
			Action:  "code_interpreter", Args: map[string]string{"python_code": codeSeattle},
		}},
		Answer: func(last map[string]any) string {
			return fmt.Sprintf("The current time in Seattle is %v.", last["result"])
		},
	},
	questionHighest: {
		Turns: []turn{
			{Thought: "I need to use the list_files tool to get the metadata for the uploaded file, and then use python to read the file and find the highest temperature.", Action: "list_files"},
			{Thought: "I have the metadata for the file. I need to use python to read the file and find the highest temperature.", Action: "code_interpreter", Args: map[string]string{"python_code": codeHighest}},
		},
		Answer: func(last map[string]any) string {
			return fmt.Sprintf("The highest temperature in the file is %s degrees.", strings.TrimSpace(fmt.Sprint(last["stdout"])))
		},
	},
	questionSort: {
		Turns: []turn{
			{Thought: "To proceed, I need to first list the files in the session pool to identify the uploaded temperature data file.", Action: "list_files"},
			{Thought: "The temperature data file is identified as 'TemperatureData.csv'. I need to read its contents, rearrange the temperature data in descending order, and then save the changes back to the original CSV file.", Action: "code_interpreter", Args: map[string]string{"python_code": codeSortBroken}},
			{Thought: "There was a syntax error in the Python code due to an incorrect line. I need to correct the code and execute it again to sort the temperature data and save it back to the CSV file.", Action: "code_interpreter", Args: map[string]string{"python_code": codeSortFixed}},
		},
		Answer: func(map[string]any) string {
			return "The temperature data has been successfully rearranged in descending order and saved back to the original CSV file, 'TemperatureData.csv'."
		},
	},
}

// replayAgent replays the seed's model turns against real tools.
type replayAgent struct {
	box    *toolbox
	script map[string]replayScript
}

func (a *replayAgent) Chat(ctx context.Context, question string) (string, error) {
	s, ok := a.script[question]
	if !ok {
		return "", fmt.Errorf("replay: no recorded turns for %q", question)
	}
	var last map[string]any
	for _, t := range s.Turns {
		a.box.p.thought("(replayed) " + t.Thought)
		args := "{}"
		if t.Args != nil {
			args = marshal(t.Args)
		}
		obs := a.box.call(ctx, t.Action, args)
		last = nil
		_ = json.Unmarshal([]byte(obs), &last)
	}
	a.box.p.thought("(replayed) I can answer without using any more tools.")
	ans := s.Answer(last)
	a.box.p.answer(ans)
	return ans, nil
}
